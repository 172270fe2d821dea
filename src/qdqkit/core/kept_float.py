"""Weighted ops a tool kept float on purpose, recorded in the model's metadata.

``quantize`` leaves some weighted ops float by decision (``--exclude``, INT8 that would not pay
for its Reformats, a size too small to gain); ``lint`` cannot re-derive every such decision from
the graph alone (whether INT8 pays depends on a whole region, not one op), so the decision and
its reason travel with the model under ``KEY`` as a JSON object {node name: reason}. Lint reads
it to stop reporting those ops as simply forgotten (QDQ102); anything not recorded is judged as
before.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import onnx_ir as ir

KEY = "qdqkit.kept_float"


def record_kept_float(model: ir.Model, reasons: Mapping[str, str]) -> None:
    """Record ``reasons`` (node name -> why it stays float); an empty mapping records nothing."""
    if reasons:
        model.metadata_props[KEY] = json.dumps(dict(sorted(reasons.items())))
    else:
        model.metadata_props.pop(KEY, None)


def kept_float(model: ir.Model) -> dict[str, str]:
    """The recorded decisions; an unreadable record counts as none (lint then judges as usual)."""
    text = model.metadata_props.get(KEY)
    if not text:
        return {}
    try:
        found = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(found, dict):
        return {}
    return {str(k): str(v) for k, v in found.items()}
