"""Rendering helpers shared by the commands: JSON for machines, aligned tables for people."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def to_jsonable(obj: Any) -> Any:
    """Plain JSON types; non-finite floats become null so the output is strict JSON.

    An object with a ``to_json()`` method is printed as what that returns (its published keys).
    """
    to_json = getattr(obj, "to_json", None)
    if callable(to_json) and not isinstance(obj, type):
        return to_jsonable(to_json())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return to_jsonable(obj.value)
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = sorted(obj) if isinstance(obj, (set, frozenset)) else obj
        return [to_jsonable(v) for v in items]
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return to_jsonable(obj.item())
    return obj


def dumps_json(obj: Any) -> str:
    return json.dumps(to_jsonable(obj), indent=2, allow_nan=False) + "\n"


def print_json(obj: Any) -> None:
    sys.stdout.write(dumps_json(obj))


def table(rows: Sequence[Sequence[object]], header: Sequence[str] | None = None) -> str:
    """A plain-text table with columns padded to their widest cell."""
    all_rows = [list(map(str, header))] if header else []
    all_rows += [[str(c) for c in row] for row in rows]
    if not all_rows:
        return ""
    widths = [max(len(r[i]) for r in all_rows if i < len(r)) for i in range(len(all_rows[0]))]
    lines = []
    for n, row in enumerate(all_rows):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip())
        if header and n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
