"""Decisions ``quantize`` made that the graph alone cannot show, recorded in the model's metadata.

1. Weighted ops kept float on purpose (``--exclude``, INT8 that would not pay for its Reformats, a
   size too small to gain): ``lint`` cannot re-derive every such decision from the graph alone
   (whether INT8 pays depends on a whole region, not one op), so the decision and its reason
   travel with the model under ``KEY`` as a JSON object {node name: reason}. Lint reads it to stop
   reporting those ops as simply forgotten (QDQ102); anything not recorded is judged as before.
2. Nodes kept FP32 for their range (values beyond FP16's 65504) under ``FP32_KEY``, in the same
   form. A float32 model shows no such choice in its types (every node is float32), yet an
   ``--int8 --fp16`` build would run those nodes FP16 and overflow: ``translate`` reads the
   record and pins them with ``--layerPrecisions ...:fp32``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import onnx_ir as ir

KEY = "qdqkit.kept_float"
FP32_KEY = "qdqkit.fp32_nodes"


def record_kept_float(model: ir.Model, reasons: Mapping[str, str], key: str = KEY) -> None:
    """Record ``reasons`` (node name -> why it stays float, or FP32 with ``FP32_KEY``); an empty
    mapping records nothing."""
    if reasons:
        model.metadata_props[key] = json.dumps(dict(sorted(reasons.items())))
    else:
        model.metadata_props.pop(key, None)


def kept_float(model: ir.Model, key: str = KEY) -> dict[str, str]:
    """The recorded decisions; an unreadable record counts as none (lint then judges as usual)."""
    text = model.metadata_props.get(key)
    if not text:
        return {}
    try:
        found = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(found, dict):
        return {}
    return {str(k): str(v) for k, v in found.items()}
