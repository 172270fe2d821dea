"""The TensorRT version and device a model was quantized for, as ``quantize`` records them.

``quantize`` writes its options into the output's metadata (``KEY``, a JSON object whose
``options`` hold ``trt`` and ``target``). ``lint`` and ``fix`` given no ``--trt`` or ``--target``
judge such a model for what it was built for, so that linting a quantized model checks what its
summary promised; an explicit option always wins. An unreadable record counts as none.
"""

from __future__ import annotations

import json

import onnx_ir as ir

from qdqkit.core.errors import QdqkitError
from qdqkit.trt.versions import TARGETS, normalize_trt_version

KEY = "qdqkit.quantize"
DEFAULT_TRT = "8.6"
DEFAULT_TARGET = "gpu"


def recorded_build(model: ir.Model) -> dict[str, str]:
    """``{"trt": ..., "target": ...}`` as recorded (either may be missing)."""
    try:
        options = json.loads(model.metadata_props.get(KEY) or "{}").get("options", {})
    except (ValueError, AttributeError):
        return {}
    found: dict[str, str] = {}
    if not isinstance(options, dict):
        return found
    try:
        if options.get("trt") is not None:
            found["trt"] = normalize_trt_version(str(options["trt"]))
    except QdqkitError:
        pass
    if options.get("target") in TARGETS:
        found["target"] = str(options["target"])
    return found


def resolve_build(model: ir.Model, trt: str | None, target: str | None
                  ) -> tuple[str, str, list[str]]:
    """The TensorRT version and target to judge ``model`` for, and which of them came from its
    record (``["trt", "target"]``, either or none)."""
    recorded = recorded_build(model) if trt is None or target is None else {}
    from_model = [k for k, given in (("trt", trt), ("target", target))
                  if given is None and k in recorded]
    return (trt or recorded.get("trt", DEFAULT_TRT),
            target or recorded.get("target", DEFAULT_TARGET), from_model)
