"""Float networks and their Q/DQ twins for the comparison tests, built in code."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from qdqkit.examples.builder import NetBuilder, build_qdq


def small_net(seed: int = 0, *, channels: int = 8, size: int = 16) -> NetBuilder:
    """conv -> conv -> residual add -> conv -> pool -> fc: every conv and the fc quantized."""
    b = NetBuilder("cmp", seed=seed)
    x = b.input("x", [1, 3, size, size])
    y = b.conv(x, 3, channels, name="stem")
    z = b.conv(y, channels, channels, name="body1")
    z = b.conv(z, channels, channels, name="body2", relu=False)
    z = b.node("Add", [z, y], name="add")
    z = b.node("Relu", [z], name="add_relu")
    z = b.conv(z, channels, channels, name="head")
    z = b.node("GlobalAveragePool", [z], name="gap")
    z = b.node("Flatten", [z], name="flatten")
    b.gemm(z, channels, 10, name="fc", out="logits")
    b.output("logits", [1, 10])
    return b


def float_and_quant(tmp: Path, seed: int = 0, *, bad: str | None = None, factor: float = 1 / 64,
                    style: str = "trt") -> tuple[Path, Path]:
    """The float model and its Q/DQ twin (max-calibrated); ``bad`` gets a scale ``factor`` times
    too small on its activation Q/DQ."""
    builder = small_net(seed)
    fmodel = builder.float_model()
    qmodel = build_qdq(builder, style=style, samples=8)
    if bad is not None:
        shrink_scale(qmodel, bad, factor)
    fpath, qpath = tmp / "float.onnx", tmp / "quant.onnx"
    onnx.save(fmodel, fpath)
    onnx.save(qmodel, qpath)
    return fpath, qpath


def shrink_scale(model: onnx.ModelProto, tensor: str, factor: float) -> None:
    """Multiply the scale of the Q/DQ pair quantizing ``tensor`` by ``factor``."""
    scale_name = next(n.input[1] for n in model.graph.node
                      if n.op_type == "QuantizeLinear" and n.input[0] == tensor)
    for init in model.graph.initializer:
        if init.name == scale_name:
            init.CopyFrom(numpy_helper.from_array(
                (numpy_helper.to_array(init) * np.float32(factor)).astype(np.float32), init.name))
            return
    raise KeyError(tensor)
