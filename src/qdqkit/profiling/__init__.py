"""``qdqkit profile``: where inference time goes.

``profile_model(model)`` times an ONNX model node by node on onnxruntime's CPU provider, with
MACs and bytes per node and a Chrome trace; ``read_trtexec_times(path)`` reads a ``trtexec``
``--exportTimes`` file or performance summary and says whether the host or the device sets the
pace.
"""

from __future__ import annotations

from qdqkit.profiling.onnx_profile import OnnxProfile, profile_model
from qdqkit.profiling.trtexec_times import PipelineTiming, read_trtexec_times

__all__ = ["OnnxProfile", "PipelineTiming", "profile_model", "read_trtexec_times"]
