"""Every Q/DQ spelling the reference trips on translates, and re-applying the scales reproduces
the Q/DQ model's outputs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from qdqkit.examples.graph import GraphBuilder, run_model
from qdqkit.translation import translate
from qdqkit.verification import verify
from tests.models import qdq_count

X = np.random.default_rng(1).uniform(-1, 1, size=(1, 4, 8, 8)).astype(np.float32)


def _translate(g: GraphBuilder, tmp_path: Path, **kwargs: object) -> tuple[dict, onnx.ModelProto, Path]:
    source = g.save(tmp_path / "m.onnx")
    result = translate(source, tmp_path / "out")
    config = json.loads(result.outputs.precision_config.read_text())
    model = onnx.load(result.outputs.noqdq_model)
    assert qdq_count(model) == 0
    return config, model, source


@pytest.mark.parametrize("spelling", ["initializer", "constant", "identity", "cast"])
def test_scales_behind_constant_identity_cast(spelling: str, tmp_path: Path) -> None:
    g = GraphBuilder()
    x = g.input("x", [1, 4, 8, 8])
    xq = g.qdq(x, 1 / 127, spelling=spelling)
    y = g.node("Conv", [xq, g.weight((4, 4, 3, 3), std=0.3)], pads=[1, 1, 1, 1])
    g.node("Relu", [y], out="y")
    g.output("y")
    config, _, source = _translate(g, tmp_path)
    expected = float(np.float16(1 / 127)) if spelling == "cast" else float(np.float32(1 / 127))
    assert config["int8_tensor_scales"] == {"x": expected}
    assert verify(source, tmp_path / "out").min_snr_db > 40


def test_q_without_zero_point_and_one_q_feeding_two_dqs(tmp_path: Path) -> None:
    g = GraphBuilder()
    x = g.input("x", [1, 4, 8, 8])
    s = g.scale(0.01)
    q = g.node("QuantizeLinear", [x, s], name="q")
    a = g.node("DequantizeLinear", [q, s], name="dq_a")
    b = g.node("DequantizeLinear", [q, s], name="dq_b")
    g.node("Add", [g.node("Relu", [a]), g.node("Sigmoid", [b])], out="y")
    g.output("y")
    config, model, _ = _translate(g, tmp_path)
    relu_out = model.graph.node[0].output[0]
    # Relu copies its input scale forward; Sigmoid never does
    assert config["int8_tensor_scales"] == {"x": float(np.float32(0.01)),
                                            relu_out: float(np.float32(0.01))}
    # a 2-input Q quantizes to uint8 by the ONNX default; both readers now read x
    assert [n.op_type for n in model.graph.node] == ["Relu", "Sigmoid", "Add"]
    assert all(n.input[0] == "x" for n in model.graph.node[:2])


def test_dq_directly_on_an_int8_graph_input(tmp_path: Path) -> None:
    g = GraphBuilder()
    x = g.input("x_int8", [1, 4], TensorProto.INT8)
    s = g.scale(0.05)
    dq = g.node("DequantizeLinear", [x, s, g.const(np.array(0, np.int8), "zp")], name="dq")
    g.node("Relu", [dq], out="y")
    g.output("y")
    config, model, _ = _translate(g, tmp_path)
    assert config["int8_tensor_scales"] == {"x_int8": float(np.float32(0.05))}
    assert model.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT


def test_dq_output_that_is_a_graph_output_keeps_its_name(tmp_path: Path) -> None:
    g = GraphBuilder()
    x = g.input("x", [1, 4, 8, 8])
    r = g.node("Relu", [x], name="relu")
    g.node("Identity", [g.qdq(r, 0.02)], name="id", out="aux_out")
    dq = g.qdq(r, 0.02, name="second")
    g.nodes[-1].output[0] = "logits"
    g.output("aux_out")
    g.output("logits")
    del dq
    config, model, source = _translate(g, tmp_path)
    assert [o.name for o in model.graph.output] == ["aux_out", "logits"]
    assert "logits" in config["int8_tensor_scales"]
    want = run_model(onnx.load(source), {"x": X})
    got = run_model(model, {"x": X})
    assert np.allclose(want[0], got[0], atol=0.03)


def test_onnxruntime_int32_bias_and_int8_weight_dq_fold_to_float(tmp_path: Path) -> None:
    g = GraphBuilder()
    x = g.input("x", [1, 4])
    xq = g.qdq(x, 0.01)
    w = np.arange(-6, 6, dtype=np.int8).reshape(3, 4)
    ws = g.const(np.full(3, 0.1, np.float32), "ws")
    wd = g.node("DequantizeLinear", [g.const(w, "w_q"), ws, g.const(np.zeros(3, np.int8), "wz")],
                name="w_dq", axis=0)
    b = g.node("DequantizeLinear", [g.const(np.array([100, -200, 5], np.int32), "b_q"),
                                    g.const(np.array(0.001, np.float32), "bs")], name="b_dq")
    g.node("Gemm", [xq, wd, b], out="y", transB=1)
    g.output("y")
    _, model, _ = _translate(g, tmp_path)
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    gemm = model.graph.node[0]
    assert np.allclose(inits[gemm.input[1]], w * np.float32(0.1))
    assert np.allclose(inits[gemm.input[2]], [0.1, -0.2, 0.005])
    assert inits[gemm.input[1]].dtype == np.float32


def test_tf_depthwise_reshape_transpose_on_weights_folds(tmp_path: Path) -> None:
    g = GraphBuilder()
    x = g.input("x", [1, 4, 8, 8])
    xq = g.qdq(x, 0.01)
    w_tf = np.random.default_rng(0).normal(size=(3, 3, 4, 1)).astype(np.float32)  # kh kw C M
    wq = g.qdq(g.const(w_tf, "w_tf"), 0.02)
    shape = g.const(np.array([3, 3, 1, 4], np.int64), "shape")
    r = g.node("Reshape", [wq, shape], name="w_reshape")
    t = g.node("Transpose", [r], name="w_transpose", perm=[3, 2, 0, 1])
    g.node("Conv", [xq, t], out="y", group=4, pads=[1, 1, 1, 1])
    g.output("y")
    _, model, _source = _translate(g, tmp_path)
    assert [n.op_type for n in model.graph.node] == ["Conv"]
    conv_w = next(i for i in model.graph.initializer if i.name == model.graph.node[0].input[1])
    assert np.array_equal(onnx.numpy_helper.to_array(conv_w),
                          np.transpose(w_tf.reshape(3, 3, 1, 4), (3, 2, 0, 1)))


def test_two_qs_with_different_scales_on_one_tensor_keep_the_first_and_warn(tmp_path: Path) -> None:
    g = GraphBuilder()
    x = g.input("x", [1, 4])
    g.node("Add", [g.qdq(x, 0.01, name="first"), g.qdq(x, 0.02, name="second")], out="y")
    g.output("y")
    result = translate(g.save(tmp_path / "m.onnx"), tmp_path / "out")
    config = json.loads(result.outputs.precision_config.read_text())
    assert config["int8_tensor_scales"] == {"x": float(np.float32(0.01))}
    assert any("'first_Q'" in w and "'second_Q'" in w for w in result.warnings)


def test_tensors_read_both_quantized_and_directly_are_reported(tmp_path: Path) -> None:
    g = GraphBuilder()
    x = g.input("x", [1, 4, 8, 8])
    y = g.node("Conv", [g.qdq(x, 1 / 127), g.weight((4, 4, 3, 3), std=0.3)], pads=[1, 1, 1, 1])
    g.node("Add", [y, x], name="skip_add", out="y")
    g.node("Shape", [x], name="shape", out="s")
    g.output("y")
    g.output("s", dtype=TensorProto.INT64)
    result = translate(g.save(tmp_path / "m.onnx"), tmp_path / "out")
    assert [(m.tensor, m.readers) for m in result.mixed_readers] == [("x", ["skip_add"])]


def test_explicit_uint8_activation_keeps_its_range(tmp_path: Path) -> None:
    """uint8 with zero point 0 spans [0, 255 s]: the int8 cache scale keeps that amax."""
    g = GraphBuilder()
    x = g.input("x", [1, 4, 8, 8])
    r = g.node("Relu", [x], name="relu")
    s = g.scale(0.004)  # amax 1.02: relu(U[-1, 1]) reaches past 127 * s = 0.51
    zp = g.const(np.array(0, np.uint8), "zp_u8")
    q = g.node("QuantizeLinear", [r, s, zp], name="q")
    dq = g.node("DequantizeLinear", [q, s, zp], name="dq")
    g.node("Sigmoid", [dq], out="y")
    g.output("y")
    config, _, source = _translate(g, tmp_path)
    relu_out = next(iter(config["int8_tensor_scales"]))
    assert config["int8_tensor_scales"][relu_out] == float(np.float32(np.float32(0.004) * 255 / 127))
    # Clipping at 127 * s would lose the upper half of the activations; keeping the range does not.
    assert verify(source, tmp_path / "out").min_snr_db > 40


@pytest.mark.parametrize("path", ["direct", "reshaped"])
def test_quantized_constants_no_weight_reads_keep_their_quantized_values(
    path: str, tmp_path: Path
) -> None:
    # onnxruntime's QDQ spelling quantizes a BatchNormalization's scale and an Add's bias like
    # activations; TensorRT never requantizes those, so the translation must carry the values the
    # Q/DQ pair gives, not the float constants (which would move the outputs off the Q/DQ model).
    gamma = np.array([0.013, 0.9, 1.7, 0.41], np.float32)
    bias = np.array([0.0031, -0.25, 0.5, 0.07], np.float32)
    g = GraphBuilder(seed=4)
    x = g.input("x", [1, 4, 8, 8])
    y = g.conv(g.qdq(x, 0.02, name="x"), 4, 4, name="c1", bias=False)
    zeros, ones = np.zeros(4, np.float32), np.ones(4, np.float32)
    y = g.node("BatchNormalization", [g.qdq(y, 0.05, name="c1"),
                                      g.qdq(g.const(gamma, "gamma"), 1.7 / 127, name="gamma"),
                                      g.const(zeros, "beta"), g.const(zeros, "mean"),
                                      g.const(ones, "var")], name="bn")
    if path == "direct":
        b = g.const(bias.reshape(1, 4, 1, 1), "bias")
    else:  # computed from constants, as paddle2onnx spells a conv bias
        b = g.node("Reshape", [g.const(bias, "bias"), g.const(np.array([1, 4, 1, 1]), "to4d")],
                   name="bias_shape")
    y = g.node("Add", [g.qdq(y, 0.05, name="bn"), g.qdq(b, 0.5 / 127, name="b")], out="y")
    g.output("y")
    _, model, source = _translate(g, tmp_path)
    constants = [onnx.numpy_helper.to_array(t) for t in model.graph.initializer]

    def carried(values: np.ndarray, scale: float) -> bool:
        step = np.float32(scale)
        quantized = (np.rint(values / step) * step).astype(np.float32)
        return any(c.size == 4 and np.array_equal(c.ravel(), quantized) for c in constants)

    assert carried(gamma, 1.7 / 127) and carried(bias, 0.5 / 127)
    assert verify(source, tmp_path / "out").min_snr_db == float("inf")
