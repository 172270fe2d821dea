"""``qdqkit quantize`` and ``qdqkit.quantize()``: float ONNX to TensorRT-ready INT8 Q/DQ.

Placement comes from ``qdqkit.trt.placement``, calibration from the streaming observers in
``qdqkit.core``; this package runs the pipeline and reports every choice (``api``, ``result``).
"""

from __future__ import annotations

from qdqkit.quantization.api import quantize, report_path, trtexec_line
from qdqkit.quantization.result import QuantizeResult

__all__ = ["QuantizeResult", "quantize", "report_path", "trtexec_line"]
