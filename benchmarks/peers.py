"""The peer quantizer every proof measures against: onnxruntime's ``quantize_static`` in its
TensorRT configuration (QDQ format, symmetric int8 activations and weights, per channel, a Q/DQ
pair on each weight, one Q/DQ pair per reader), imported only when used."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx

ORT_TENSORRT_OPTIONS: dict[str, Any] = {
    "ActivationSymmetric": True,
    "WeightSymmetric": True,
    "AddQDQPairToWeight": True,
    "DedicatedQDQPair": True,
    "QDQOpTypePerChannelSupportToAxis": {"MatMul": 1},
}


def at_opset13(source: Path, folder: Path) -> Path:
    """``source``, or a copy converted to opset 13: per-channel Q/DQ in an older model does not
    load in onnxruntime."""
    from onnx import version_converter

    model = onnx.load(str(source))
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    if opset >= 13:
        return source
    path = folder / f"{source.stem}_opset13.onnx"
    onnx.save(version_converter.convert_version(model, 13), str(path))
    return path


def ort_quantize_static(source: Path, out: Path, samples: Iterable[Mapping[str, np.ndarray]],
                        method: str = "MinMax") -> None:
    """Quantize ``source`` (opset 13 or later) into ``out`` with onnxruntime, calibrating with
    ``method`` (a ``CalibrationMethod`` name) on ``samples``."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.samples = iter(samples)

        def get_next(self) -> dict[str, np.ndarray] | None:
            sample = next(self.samples, None)
            return None if sample is None else dict(sample)

    quantize_static(str(source), str(out), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    per_channel=True, calibrate_method=getattr(CalibrationMethod, method),
                    extra_options=dict(ORT_TENSORRT_OPTIONS))
