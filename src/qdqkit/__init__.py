"""qdqkit: get ONNX models into fast, accurate INT8 on NVIDIA TensorRT, without a GPU.

The public API mirrors the command line; each function takes a model (path or onnx-ir model) and
options, and returns a typed result object. Imports are lazy so ``import qdqkit`` is cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

from qdqkit.core import lazy_sympy

__version__ = "0.1.0"

# public name -> "module:attribute"
_API = {
    "QdqkitError": "qdqkit.core.errors:QdqkitError",
    "load_model": "qdqkit.core.model_io:load_model",
    "inspect_model": "qdqkit.inspection:inspect_model",
    "lint": "qdqkit.linting:lint",
    "predict_engine": "qdqkit.trt.predict:predict_engine",
    "translate": "qdqkit.translation.api:translate",
    "translate_model": "qdqkit.translation.api:translate_model",
    "TranslateOptions": "qdqkit.translation.api:TranslateOptions",
    "verify": "qdqkit.verification:verify",
    "quantize": "qdqkit.quantization:quantize",
    "fix": "qdqkit.fixing:fix",
    "read_engine_graph": "qdqkit.trt.engine_json:read_engine_graph",
    "report_engine": "qdqkit.engine.report:report_engine",
    "draw_engine": "qdqkit.engine.draw:draw_engine",
    "diff_engines": "qdqkit.engine.diff:diff_engines",
    "build_engine": "qdqkit.engine.build:build_engine",
    "compare": "qdqkit.comparison:compare",
    "profile_model": "qdqkit.profiling:profile_model",
    "read_trtexec_times": "qdqkit.profiling:read_trtexec_times",
}

__all__ = ["__version__", *sorted(_API)]

# onnx-ir imports sympy eagerly; defer it until a symbolic dimension is computed with.
lazy_sympy.install()


def __getattr__(name: str) -> Any:
    target = _API.get(name)
    if target is None:
        raise AttributeError(f"module 'qdqkit' has no attribute {name!r}")
    module_name, attr = target.split(":")
    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value
