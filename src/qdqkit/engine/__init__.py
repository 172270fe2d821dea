"""``qdqkit engine``: report, draw, diff and build TensorRT engines from their ``trtexec`` exports.

Everything here takes an ``EngineGraph`` (``qdqkit.trt.engine``), so a real engine read by
``qdqkit.trt.engine_json`` and one predicted from an ONNX model are handled the same way.
"""

from __future__ import annotations
