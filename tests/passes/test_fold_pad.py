from __future__ import annotations

import numpy as np

from qdqkit.examples.graph import GraphBuilder, run_model
from qdqkit.passes.fold_pad import FoldPadIntoConv
from tests.models import ops

X = np.random.default_rng(0).normal(size=(1, 2, 5, 5)).astype(np.float32)
W = np.random.default_rng(1).normal(size=(3, 2, 3, 3)).astype(np.float32)


def test_zero_pad_merges_into_conv_pads() -> None:
    g = GraphBuilder()
    g.input("x", [1, 2, 5, 5])
    g.output("y")
    g.const(W, "w")
    g.const(np.array([0, 0, 2, 1, 0, 0, 1, 3], np.int64), "pads")
    g.node("Pad", ["x", "pads"], name="pad", out="p")
    g.node("Conv", ["p", "w"], name="conv", out="y", pads=[1, 0, 0, 1])
    m = g.ir()
    want = run_model(m, {"x": X})[0]
    FoldPadIntoConv()(m)
    assert ops(m) == ["Conv"]
    assert list(m.graph.node(0).attributes["pads"].as_ints()) == [3, 1, 1, 4]
    assert np.allclose(run_model(m, {"x": X})[0], want, atol=1e-5)


def test_reflect_or_nonzero_pads_stay() -> None:
    for attrs, value in (({"mode": "reflect"}, None), ({}, np.array(1.0, np.float32))):
        g = GraphBuilder()
        g.input("x", [1, 2, 5, 5])
        g.output("y")
        g.const(W, "w")
        inputs = ["x", g.const(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")]
        if value is not None:
            inputs.append(g.const(value, "v"))
        g.node("Pad", inputs, name="", out="p", **attrs)
        g.node("Conv", ["p", "w"], name="", out="y")
        m = g.ir()
        FoldPadIntoConv()(m)
        assert ops(m) == ["Pad", "Conv"]
