"""Former home of the JSON and table helpers, now in ``qdqkit.report``; kept so old imports work."""

from __future__ import annotations

from qdqkit.report.json_output import dumps_json, print_json, to_jsonable
from qdqkit.report.text import table

__all__ = ["dumps_json", "print_json", "table", "to_jsonable"]
