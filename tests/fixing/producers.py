"""Q/DQ models in each producer's spelling, for ``fix``: built in code, seeded, small.

onnxruntime (``quantize_static`` presets on the fixtures' ResNet-18, calibrated on photos),
ModelOpt (fp16, opset 19), NNCF (conv outputs and both Add inputs, unequal scales), PPQ (every
tensor its own scale: inside SiLU, around MaxPool/Concat, on the output), pytorch-quantization
(per-consumer input quantizers), TensorFlow QAT (HWIO weights through Q/DQ and a Transpose,
an unfolded BatchNormalization, a DQ -> Q requantize chain).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir

from qdqkit.examples.builder import NetBuilder, build_qdq, demo_network
from qdqkit.examples.graph import GraphBuilder
from qdqkit.examples.resnet import resnet18_float

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PHOTOS = FIXTURES / "fixing" / "photos64.npy"


def photos() -> np.ndarray:
    return np.load(PHOTOS)


def ort_resnet18(folder: Path, preset: str) -> tuple[Path, Path]:
    """The fixtures' ResNet-18 (64 px) quantized by onnxruntime; (float model, Q/DQ model)."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Photos(CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter([{"input": p[None]} for p in photos()])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.batches, None)

    source = folder / "resnet18_float.onnx"
    onnx.save(resnet18_float(batch=1, size=64), source)
    options: dict[str, object] = {}
    if preset == "trt":
        options = {"activation_type": QuantType.QInt8, "weight_type": QuantType.QInt8,
                   "per_channel": True,
                   "extra_options": {"ActivationSymmetric": True, "WeightSymmetric": True}}
    target = folder / f"resnet18_ort_{preset}.onnx"
    quantize_static(str(source), str(target), Photos(), quant_format=QuantFormat.QDQ,
                    **options)  # type: ignore[arg-type]
    return source, target


def modelopt() -> ir.Model:
    return ir.serde.deserialize_model(demo_network("modelopt"))


def pytorch_quantization() -> ir.Model:
    return ir.serde.deserialize_model(demo_network("trt"))


def nncf() -> ir.Model:
    b = NetBuilder(name="nncf", seed=3)
    x = b.input("input", [1, 16, 16, 16])
    y = b.conv(x, 16, 16, name="c1")
    z = b.conv(y, 16, 16, relu=False, name="c2")
    b.quantize(z)  # NNCF quantizes both Add inputs and the conv output before the Add
    y = b.node("Add", [z, b.quantize(y)], name="add")
    y = b.node("Relu", [y], name="relu")
    y = b.conv(y, 16, 8, name="c3")
    b.output(y)
    return ir.serde.deserialize_model(build_qdq(b))


def ppq() -> ir.Model:
    """Every tensor quantized with its own scale: SiLU halves, the SPPF MaxPools and Concat."""
    b = NetBuilder(name="ppq", seed=4)
    x = b.input("input", [1, 8, 16, 16])
    y = b.conv(x, 8, 16, relu=False, name="c1")
    s = b.node("Sigmoid", [b.quantize(y)], name="c1_sigmoid")
    y = b.node("Mul", [y, b.quantize(s)], name="c1_silu")
    p1 = b.node("MaxPool", [b.quantize(y)], name="pool1", kernel_shape=[5, 5], pads=[2] * 4)
    p2 = b.node("MaxPool", [b.quantize(p1)], name="pool2", kernel_shape=[5, 5], pads=[2] * 4)
    p3 = b.node("MaxPool", [b.quantize(p2)], name="pool3", kernel_shape=[5, 5], pads=[2] * 4)
    y = b.node("Concat", [y, p1, p2, b.quantize(p3)], name="concat", axis=1)
    y = b.conv(y, 64, 16, name="c2")
    b.quantize(y)  # PPQ quantizes the network output too: its DQ writes the output
    b.output(y)
    return ir.serde.deserialize_model(build_qdq(b))


def tf_qat() -> ir.Model:
    """TF QAT export: HWIO weights -> Q -> DQ -> Transpose, BN left unfolded, a requantize chain."""
    g = GraphBuilder("tf_qat", seed=5)
    x = g.input("input", [1, 8, 12, 12])
    rng = np.random.default_rng(5)

    def conv(v: str, cin: int, cout: int, name: str) -> str:
        w = rng.normal(0, np.sqrt(2.0 / (cin * 9)), (3, 3, cin, cout)).astype(np.float32)
        scale = (np.abs(w).reshape(-1, cout).max(axis=0) / 127).astype(np.float32)
        params = [g.const(scale, f"{name}_w_scale"), g.const(np.zeros(cout, np.int8), f"{name}_w_zp")]
        wq = g.node("QuantizeLinear", [g.const(w, f"{name}_kernel"), *params], axis=3,
                    name=f"{name}_w_Q")
        wdq = g.node("DequantizeLinear", [wq, *params], axis=3, name=f"{name}_w_DQ")
        oihw = g.node("Transpose", [wdq], perm=[3, 2, 0, 1], name=f"{name}_w_T")
        return g.node("Conv", [v, oihw], kernel_shape=[3, 3], pads=[1] * 4, name=name)

    y = conv(g.qdq(x, 0.03, name="in1"), 8, 16, "conv1")
    y = g.node("Relu", [g.bn(y, 16, name="bn1", random=True)], name="relu1")
    chained = g.qdq(g.qdq(y, 0.02, name="act_a"), 0.02, name="act_b")  # DQ -> Q, equal scales
    y = conv(chained, 16, 8, "conv2")
    g.output(g.node("Relu", [g.bn(y, 8, name="bn2", random=True)], name="relu2"))
    return g.ir()


def needs_calibration() -> ir.Model:
    """A conv whose weight is quantized but whose input, after a Tanh, has no scale anywhere."""
    g = GraphBuilder("half", seed=6)
    x = g.input("input", [1, 32, 16, 16])
    y = g.node("Tanh", [x], name="tanh")
    y = g.conv(y, 32, 32, name="conv")
    g.output(g.node("Relu", [y], name="relu"))
    return g.ir()
