"""Scale propagation rules, and the reference defects they must not repeat."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import onnx

from qdqkit.examples.graph import GraphBuilder
from qdqkit.translation import TranslateOptions, translate


def _scales(g: GraphBuilder, tmp_path: Path, **options: object) -> tuple[dict[str, float], list[str]]:
    result = translate(g.save(tmp_path / "m.onnx"), tmp_path / "out", TranslateOptions(**options))  # type: ignore[arg-type]
    config = json.loads(result.outputs.precision_config.read_text())
    return config["int8_tensor_scales"], config["fp16_nodes"]


F = float(np.float32(0.02))


def test_copies_forward_and_backward_to_a_fixpoint(tmp_path: Path) -> None:
    # x -> Relu -> MaxPool -> Q/DQ -> Conv: the scale on the pool output reaches back to x's Relu
    # output (backward), and a second branch from the Relu output (forward from it) also gets it.
    g = GraphBuilder()
    x = g.input("x", [1, 4, 8, 8])
    r = g.node("Relu", [x], name="relu")
    p = g.node("MaxPool", [r], name="pool", kernel_shape=[2, 2])
    w = g.const(np.ones((4, 4, 1, 1), np.float32), "w")
    g.node("Conv", [g.qdq(p, 0.02), w], out="y")
    g.node("Relu", [g.node("Flatten", [r], name="flat")], out="z")
    g.output("y")
    g.output("z")
    scales, _ = _scales(g, tmp_path)
    assert scales == {"pool_out": F, "relu_out": F, "x": F, "flat_out": F}


def test_graph_outputs_never_get_propagated_scales(tmp_path: Path) -> None:
    g = GraphBuilder()
    x = g.input("x", [1, 4])
    g.node("Relu", [g.qdq(x, 0.02)], out="logits")
    g.output("logits")
    scales, _ = _scales(g, tmp_path)
    assert scales == {"x": F}


def test_concat_keeps_its_own_scale_and_fills_missing_inputs(tmp_path: Path) -> None:
    g = GraphBuilder()
    a = g.node("Relu", [g.input("a", [1, 2])], name="ra")
    b = g.node("Relu", [g.input("b", [1, 2])], name="rb")
    c = g.node("Relu", [g.input("c", [1, 2])], name="rc")
    cat = g.node("Concat", [g.qdq(a, 9 / 127), b, c], name="cat", axis=1)
    g.node("Sigmoid", [g.qdq(cat, 4 / 127)], out="y")
    g.output("y")
    scales, _ = _scales(g, tmp_path, infer_concat_scales=True)
    own = float(np.float32(4 / 127))
    assert scales["cat_out"] == own  # the reference overwrote it with 9/127
    assert scales["rb_out"] == own and scales["rc_out"] == own


def _sigmoid_model(out_amax: float) -> GraphBuilder:
    g = GraphBuilder()
    x = g.input("x", [1, 4])
    conv = g.node("Relu", [x], name="pre")
    s = g.node("Sigmoid", [g.node("Neg", [conv], name="neg")], name="sig")
    g.node("Tanh", [g.qdq(s, out_amax / 127)], out="y")
    g.output("y")
    return g


def test_sigmoid_backward_refuses_negative_nan_and_saturated(tmp_path: Path) -> None:
    for amax in (0.3, 1.0, float(np.nextafter(np.float32(1 / 127), 1)) * 127):
        scales, _ = _scales(_sigmoid_model(amax), tmp_path)
        assert set(scales) == {"sig_out"}, amax
        assert all(math.isfinite(v) and v > 0 for v in scales.values())


def test_sigmoid_backward_uses_logit_of_output_amax(tmp_path: Path) -> None:
    scales, _ = _scales(_sigmoid_model(0.9), tmp_path)
    assert math.isclose(scales["neg_out"] * 127, math.log(0.9 / 0.1), rel_tol=1e-6)


def test_mul_product_rule_on_either_input(tmp_path: Path) -> None:
    g = GraphBuilder()
    a = g.node("Relu", [g.input("a", [1, 4])], name="ra")
    b = g.node("Relu", [g.input("b", [1, 4])], name="rb")
    m = g.node("Mul", [a, g.qdq(b, 3 / 127)], name="mul")
    g.node("Tanh", [g.qdq(m, 12 / 127)], out="y")
    g.output("y")
    scales, _ = _scales(g, tmp_path, infer_mul_scales=True)
    assert math.isclose(scales["ra_out"] * 127, 4.0, rel_tol=1e-6)


def test_silu_sigmoid_feeding_mul_gets_amax_one(tmp_path: Path) -> None:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 4]), 0.05)
    g.node("Mul", [x, g.node("Sigmoid", [x], name="sig")], out="y")
    g.output("y")
    scales, fp16 = _scales(g, tmp_path, infer_mul_scales=True)
    assert scales["sig_out"] == float(np.float32(1 / 127))
    assert fp16 == []


def test_fp16_nodes_are_unique_named_consumers_of_unscaled_tensors(tmp_path: Path) -> None:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 4]), 0.05)
    sig = g.node("Sigmoid", [x], name="sig")
    g.node("Mul", [sig, sig], out="y", name="")  # unnamed, and reads the tensor twice
    g.output("y")
    _, fp16 = _scales(g, tmp_path)
    assert fp16 == ["Mul_0"]


def test_unary_scale_goes_to_one_add_input_only(tmp_path: Path) -> None:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 4, 4, 4]), 0.05)
    w = g.const(np.ones((4, 4, 1, 1), np.float32), "w")
    c1 = g.node("Conv", [x, w], name="c1")
    c2 = g.node("Conv", [x, w], name="c2")
    g.node("Relu", [g.node("Add", [c1, c2], name="add")], out="y")
    g.output("y")
    scales, fp16 = _scales(g, tmp_path, add_unary_ew_scales_for_dla=True)
    assert "c1_out" not in scales and "c2_out" not in scales  # the reference gave both 1.0
    assert fp16 == ["add", "Relu_0"] or "add" in fp16

    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 4, 4, 4]), 0.05)
    c1 = g.node("Conv", [x, g.const(np.ones((4, 4, 1, 1), np.float32), "w")], name="c1")
    g.node("Relu", [g.node("Add", [c1, x], name="add")], out="y")
    g.output("y")
    scales, _ = _scales(g, tmp_path, add_unary_ew_scales_for_dla=True)
    assert scales["c1_out"] == 1.0


def test_rename_node_outputs_keeps_graph_inputs_and_outputs(tmp_path: Path) -> None:
    g = GraphBuilder()
    x = g.input("x", [1, 4])
    r = g.node("Relu", [g.qdq(x, 0.05)], name="relu")
    g.node("Sigmoid", [r], name="sig", out="logits")
    g.output("logits")
    result = translate(g.save(tmp_path / "m.onnx"), tmp_path / "out",
                       TranslateOptions(rename_node_outputs=True))
    model = onnx.load(result.outputs.noqdq_model)
    assert [o.name for o in model.graph.output] == ["logits"]
    assert model.graph.node[0].output[0] == "relu"
    config = json.loads(result.outputs.precision_config.read_text())
    assert set(config["int8_tensor_scales"]) == {"x", "relu"}


def test_average_pools_propagate_forward_only(tmp_path: Path) -> None:
    # Backward, the average's small range would clip its input (the reference did this).
    g = GraphBuilder()
    r = g.node("Relu", [g.input("x", [1, 4, 8, 8])], name="relu")
    gap = g.node("GlobalAveragePool", [r], name="gap")
    g.node("Flatten", [g.qdq(gap, 0.02)], out="y")
    g.output("y")
    scales, _ = _scales(g, tmp_path, infer_average_pool_scales=True)
    assert scales == {"gap_out": F}

    g = GraphBuilder()
    r = g.node("Relu", [g.qdq(g.input("x", [1, 4, 8, 8]), 0.02)], name="relu")
    g.node("Flatten", [g.node("GlobalAveragePool", [r], name="gap")], name="flat", out="y2")
    g.node("Sigmoid", ["y2"], out="y")
    g.output("y")
    (tmp_path / "b").mkdir()
    scales, _ = _scales(g, tmp_path / "b", infer_average_pool_scales=True)
    assert scales["gap_out"] == F and scales["relu_out"] == F


def test_hard_sigmoid_carries_its_saturation_points_not_its_output_range(tmp_path: Path) -> None:
    """Copying HardSigmoid's [0, 1] back would clip its input to +-1 (a squeeze-excite gate then
    stays near 0.5); x beyond the saturation points maps to 0 or 1 whatever its value, so the
    input takes those points as its range. Forward, the input's range mapped through it."""
    import onnxruntime as ort

    g = GraphBuilder()
    x = g.node("Relu", [g.input("x", [1, 4])], name="pre")
    gate = g.node("HardSigmoid", [x], name="hs", alpha=1 / 6, beta=0.5)
    g.node("Tanh", [g.qdq(gate, 1 / 127)], out="y")
    g.node("Tanh", [g.node("HardSigmoid", [g.qdq(g.input("v", [1, 4]), 2 / 127)], name="hs2")],
           out="z")
    g.output("y")
    g.output("z")
    scales, _ = _scales(g, tmp_path, addtl_ops_to_infer_adjacent_scales=("HardSigmoid",))
    assert math.isclose(scales["pre_out"] * 127, 3.0, rel_tol=1e-6)  # max(beta, 1 - beta) / alpha
    assert math.isclose(scales["hs2_out"] * 127, 0.5 + 0.2 * 2.0, rel_tol=1e-6)  # ONNX defaults
    # The independent check: clipping to the saturation points changes no output of the op.
    model = onnx.helper.make_model(onnx.helper.make_graph(
        [onnx.helper.make_node("HardSigmoid", ["a"], ["b"], alpha=1 / 6, beta=0.5)], "hs",
        [onnx.helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, [5])],
        [onnx.helper.make_tensor_value_info("b", onnx.TensorProto.FLOAT, [5])]),
        opset_imports=[onnx.helper.make_opsetid("", 17)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    a = np.array([-40.0, -3.5, 0.7, 3.2, 25.0], np.float32)
    np.testing.assert_array_equal(session.run(None, {"a": a})[0],
                                  session.run(None, {"a": np.clip(a, -3.0, 3.0)})[0])
