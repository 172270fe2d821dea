from __future__ import annotations

import numpy as np
from onnx import helper

from qdqkit.passes.fold_pad import FoldPadIntoConv
from tests.passes.pass_graphs import model, ops, run

X = np.random.default_rng(0).normal(size=(1, 2, 5, 5)).astype(np.float32)
W = np.random.default_rng(1).normal(size=(3, 2, 3, 3)).astype(np.float32)


def test_zero_pad_merges_into_conv_pads() -> None:
    nodes = [
        helper.make_node("Pad", ["x", "pads"], ["p"], name="pad"),
        helper.make_node("Conv", ["p", "w"], ["y"], name="conv", pads=[1, 0, 0, 1]),
    ]
    pads = np.array([0, 0, 2, 1, 0, 0, 1, 3], np.int64)
    m = model(nodes, {"w": W, "pads": pads}, {"x": [1, 2, 5, 5]}, ["y"])
    want = run(m, {"x": X})[0]
    FoldPadIntoConv()(m)
    assert ops(m) == ["Conv"]
    assert list(m.graph.node(0).attributes["pads"].as_ints()) == [3, 1, 1, 4]
    assert np.allclose(run(m, {"x": X})[0], want, atol=1e-5)


def test_reflect_or_nonzero_pads_stay() -> None:
    for attrs, value in (({"mode": "reflect"}, None), ({}, np.array(1.0, np.float32))):
        inits = {"w": W, "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)}
        inputs = ["x", "pads"]
        if value is not None:
            inits["v"] = value
            inputs.append("v")
        nodes = [helper.make_node("Pad", inputs, ["p"], **attrs),
                 helper.make_node("Conv", ["p", "w"], ["y"])]
        m = model(nodes, inits, {"x": [1, 2, 5, 5]}, ["y"])
        FoldPadIntoConv()(m)
        assert ops(m) == ["Pad", "Conv"]
