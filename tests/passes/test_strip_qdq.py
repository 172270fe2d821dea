from __future__ import annotations

import numpy as np

from qdqkit.examples.graph import GraphBuilder, run_model
from qdqkit.passes.scales import ScaleTable
from qdqkit.passes.strip_qdq import StripQdqPairs
from tests.models import ops

X = np.random.default_rng(0).uniform(-1, 1, size=(1, 3)).astype(np.float32)


def test_pairs_go_scales_stay_and_dq_only_weights_become_float() -> None:
    g = GraphBuilder()
    x = g.input("x", [1, 3])
    s, z = g.const(np.array(0.01, np.float32), "s"), g.const(np.array(0, np.int8), "z")
    w_int8 = g.const(np.array([[1, -2, 3], [127, 0, -127]], np.int8), "w_int8")
    ws = g.const(np.array([0.5, 0.25], np.float32), "ws")
    xd = g.node("DequantizeLinear", [g.node("QuantizeLinear", [x, s, z], name="q", out="xq"), s, z],
                name="dq", out="xd")
    wd = g.node("DequantizeLinear", [w_int8, ws], name="w_dq", out="wd", axis=0)
    g.output(g.node("Gemm", [xd, wd], name="gemm", out="y", transB=1))
    m = g.ir()
    want = run_model(m, {"x": X})[0]
    scales = ScaleTable()
    StripQdqPairs(scales)(m)
    assert ops(m) == ["Gemm"]
    assert [(e.value.name, e.scale, e.source) for e in scales] == [("x", float(np.float32(0.01)), "q")]
    w = m.graph.node(0).inputs[1]
    assert w.name == "wd" and np.array_equal(w.const_value.numpy(), [[0.5, -1, 1.5], [31.75, 0, -31.75]])
    # activations now float: outputs agree up to the activation quantization step
    assert np.allclose(run_model(m, {"x": X})[0], want, atol=0.01 * 3 * 32)


def test_dq_output_graph_output_is_renamed_not_lost() -> None:
    g = GraphBuilder()
    s, z = g.const(np.array(0.01, np.float32), "s"), g.const(np.array(0, np.int8), "z")
    r = g.node("Relu", [g.input("x", [1, 3])], name="relu", out="r")
    rq = g.node("QuantizeLinear", [r, s, z], name="q", out="rq")
    g.output(g.node("DequantizeLinear", [rq, s, z], name="dq", out="y"))
    m = g.ir()
    scales = ScaleTable()
    StripQdqPairs(scales)(m)
    assert ops(m) == ["Relu"] and m.graph.outputs[0].name == "y"
    assert m.graph.node(0).outputs[0] is m.graph.outputs[0]


def test_input_straight_to_output_keeps_an_identity() -> None:
    g = GraphBuilder()
    s, z = g.const(np.array(0.01, np.float32), "s"), g.const(np.array(0, np.int8), "z")
    xq = g.node("QuantizeLinear", [g.input("x", [1, 3]), s, z], name="q", out="xq")
    g.output(g.node("DequantizeLinear", [xq, s, z], name="dq", out="y"))
    m = g.ir()
    StripQdqPairs(ScaleTable())(m)
    assert ops(m) == ["Identity"] and m.graph.outputs[0].name == "y"
    assert np.array_equal(run_model(m, {"x": X})[0], X)
