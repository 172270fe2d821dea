from __future__ import annotations

import numpy as np
from onnx import helper

from qdqkit.passes.scales import ScaleTable
from qdqkit.passes.strip_qdq import StripQdqPairs
from tests.passes.pass_graphs import model, ops, run

X = np.random.default_rng(0).uniform(-1, 1, size=(1, 3)).astype(np.float32)


def test_pairs_go_scales_stay_and_dq_only_weights_become_float() -> None:
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q"),
        helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq"),
        helper.make_node("DequantizeLinear", ["w_int8", "ws"], ["wd"], name="w_dq", axis=0),
        helper.make_node("Gemm", ["xd", "wd"], ["y"], name="gemm", transB=1),
    ]
    inits = {"s": np.array(0.01, np.float32), "z": np.array(0, np.int8),
             "w_int8": np.array([[1, -2, 3], [127, 0, -127]], np.int8),
             "ws": np.array([0.5, 0.25], np.float32)}
    m = model(nodes, inits, {"x": [1, 3]}, ["y"])
    want = run(m, {"x": X})[0]
    scales = ScaleTable()
    StripQdqPairs(scales)(m)
    assert ops(m) == ["Gemm"]
    assert [(e.value.name, e.scale, e.source) for e in scales] == [("x", float(np.float32(0.01)), "q")]
    w = m.graph.node(0).inputs[1]
    assert w.name == "wd" and np.array_equal(w.const_value.numpy(), [[0.5, -1, 1.5], [31.75, 0, -31.75]])
    # activations now float: outputs agree up to the activation quantization step
    assert np.allclose(run(m, {"x": X})[0], want, atol=0.01 * 3 * 32)


def test_dq_output_graph_output_is_renamed_not_lost() -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("QuantizeLinear", ["r", "s", "z"], ["rq"], name="q"),
        helper.make_node("DequantizeLinear", ["rq", "s", "z"], ["y"], name="dq"),
    ]
    m = model(nodes, {"s": np.array(0.01, np.float32), "z": np.array(0, np.int8)},
              {"x": [1, 3]}, ["y"])
    scales = ScaleTable()
    StripQdqPairs(scales)(m)
    assert ops(m) == ["Relu"] and m.graph.outputs[0].name == "y"
    assert m.graph.node(0).outputs[0] is m.graph.outputs[0]


def test_input_straight_to_output_keeps_an_identity() -> None:
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q"),
        helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["y"], name="dq"),
    ]
    m = model(nodes, {"s": np.array(0.01, np.float32), "z": np.array(0, np.int8)},
              {"x": [1, 3]}, ["y"])
    StripQdqPairs(ScaleTable())(m)
    assert ops(m) == ["Identity"] and m.graph.outputs[0].name == "y"
    assert np.array_equal(run(m, {"x": X})[0], X)
