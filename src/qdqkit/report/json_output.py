"""Results as strict JSON, the same way for every command's ``--json``.

1. An object with a ``to_json()`` method is written as what that returns (a result type that
   publishes fixed keys); other dataclasses become objects with their fields in declaration order.
2. Enums become their values; sets sorted lists; paths strings; numpy scalars Python numbers.
3. Numbers JSON cannot hold are written as the strings ``"inf"``, ``"-inf"`` and ``"nan"``, so the
   output stays strict JSON and an infinite SNR (identical outputs) is not mistaken for ``null``,
   which always means "unknown" or "not applicable".
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import sys
from pathlib import Path
from typing import Any


def json_number(value: float) -> float | str:
    """``value`` itself when finite, else ``"inf"``, ``"-inf"`` or ``"nan"``."""
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "nan"
    return "inf" if value > 0 else "-inf"


def to_jsonable(obj: Any) -> Any:
    """Plain JSON types (see the module docstring for the rules)."""
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
        return json_number(obj)
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return to_jsonable(obj.item())
    return obj


def dumps_json(obj: Any) -> str:
    return json.dumps(to_jsonable(obj), indent=2, allow_nan=False) + "\n"


def print_json(obj: Any) -> None:
    sys.stdout.write(dumps_json(obj))
