"""quantize's default output (TensorRT 11, FP16 remainder), translated for TensorRT <= 10, is what
the Q/DQ model computes: ``verify`` finds no loss and no weight the implicit build requantizes.

Two things used to break it: a BatchNormalization kept apart from its conv, which the
translation folds and so rounds differently, and a tiny weight channel whose float16 scale
rounded up, leaving its largest integer below 127 and off TensorRT's max|w|/127 grid.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from qdqkit.quantization import quantize
from qdqkit.translation import translate
from qdqkit.verification import verify
from tests.quantization.float_models import calibration_batches, resnet

# A scale between two float16 subnormals, nearer the upper one: rounded to nearest it grows, so
# the channel's largest integer becomes round(127 * 12.8 / 13) = 125.
_SUBNORMAL = float(np.finfo(np.float16).smallest_subnormal)
_TINY_AMAX = 127 * 12.8 * _SUBNORMAL


def _model_with_a_tiny_channel() -> onnx.ModelProto:
    proto = resnet().proto()
    # The classifier's Gemm: no BN folds into it, so its weight is quantized as written here.
    gemm = next(n for n in proto.graph.node if n.op_type == "Gemm")
    weight = next(t for t in proto.graph.initializer if t.name == gemm.input[1])
    array = numpy_helper.to_array(weight).copy()  # (out, in) with transB=1
    array[0] *= _TINY_AMAX / np.abs(array[0]).max()
    weight.CopyFrom(numpy_helper.from_array(array.astype(np.float32), weight.name))
    return proto


def test_the_default_output_translates_and_verifies_exactly(tmp_path: Path) -> None:
    proto = _model_with_a_tiny_channel()
    assert any(n.op_type == "BatchNormalization" for n in proto.graph.node)
    out = tmp_path / "model_int8.onnx"
    result = quantize(proto, calibration_batches(resnet(), 4), output=out, method="max")
    assert result.options["float_remainder"] == "fp16"
    assert not [n for n in result.model.graph if n.op_type == "BatchNormalization"]
    translate(out, tmp_path / "t")
    check = verify(out, tmp_path / "t")
    assert check.changed_weights == 0
    assert check.min_snr_db == math.inf, check.outputs


def test_layers_kept_fp32_for_their_range_are_emulated_fp32(tmp_path: Path) -> None:
    # conv1's layer writes beyond 65504, so quantize keeps it FP32 and translate pins it with
    # --layerPrecisions ...:fp32; rounding what it writes to FP16 would make both models inf.
    from qdqkit.examples.graph import GraphBuilder

    g = GraphBuilder("wide", seed=0, opset=19)
    x = g.input("x", [1, 32, 8, 8])
    r1 = g.node("Relu", [g.conv(x, 32, 32, weight="float", name="conv1", std=1e5)],
                name="relu1", out="r1")
    y = g.node("Relu", [g.conv(r1, 32, 32, weight="float", name="conv2", std=1e-3)],
               name="relu2", out="y")
    g.output(y, [1, 32, 8, 8])
    batches = [{"x": np.random.default_rng(i).uniform(0, 1, (1, 32, 8, 8)).astype(np.float32)}
               for i in range(4)]
    out = tmp_path / "wide_int8.onnx"
    result = quantize(g.proto(), batches, output=out, method="max", exclude=["conv1"],
                      keep_unpaid=True)
    assert {"conv1", "relu1"} <= set(result.fp32_nodes)
    translate(out, tmp_path / "t")
    layer_arg = next((tmp_path / "t").glob("*_layer_arg.txt")).read_text()
    assert "conv1:fp32" in layer_arg and ":fp16" not in layer_arg
    check = verify(out, tmp_path / "t", inputs=batches)
    assert check.passed and check.min_snr_db > 40, check.outputs


def test_the_dla_output_translates_with_the_printed_line_and_verifies_exactly(
    tmp_path: Path,
) -> None:
    # A SiLU's conv output and Sigmoid output are separate tensors in the implicit build: given
    # the Mul's range by translate's propagation (H7), the conv output clipped its negative half,
    # and the box decode's stride constant got a guessed range. Placed and calibrated on their
    # own, with only the unary-scale flag left to translate, the build computes the Q/DQ model.
    import shlex

    from qdqkit.cli import main
    from tests.quantization.float_models import yolo

    out = tmp_path / "yolo_dla.onnx"
    result = quantize(yolo().proto(), calibration_batches(yolo(), 4), output=out, method="max",
                      trt="10", target="dla")
    assert result.lint_errors == 0
    translate_line = result.trtexec.split(" && ")[0]
    assert main(shlex.split(translate_line)[1:]) == 0
    folder = Path(shlex.split(translate_line)[shlex.split(translate_line).index("-o") + 1])
    check = verify(out, folder)
    assert check.min_snr_db == math.inf, check.outputs
    inner = [n for n in result.model.graph if n.op_type == "QuantizeLinear"
             and n.inputs[0].producer() is not None
             and n.inputs[0].producer().op_type in ("Conv", "Sigmoid")]
    assert inner, "the SiLU's inner tensors carry their own ranges"


def test_a_dla_output_whose_if_body_reads_the_input_verifies_exactly(tmp_path: Path) -> None:
    # openwakeword's wake-word models run a verifier network inside an If that reads the network
    # input. The engine takes the input in float and the body's layers carry no cached scale, so
    # the DLA placement quantizes the input for the main graph only, as verify emulates it.
    from qdqkit.examples.graph import GraphBuilder

    g = GraphBuilder("gated", seed=2, opset=17)
    x = g.input("x", [1, 16, 8, 8])
    g.output(g.node("Relu", [g.conv(x, 16, 16, weight="float")]))
    g.output(g.branch_reading(x))
    out = tmp_path / "gated.onnx"
    quantize(g.proto(), calibration_batches(g, 2), output=out, trt="10", target="dla")
    translate(out, tmp_path / "bundle")
    check = verify(out, tmp_path / "bundle", samples=2)
    assert [c.snr_db for c in check.outputs] == [math.inf] * 2, check.outputs
