from __future__ import annotations

import numpy as np

from qdqkit.examples.graph import GraphBuilder, run_model
from qdqkit.passes.fold_weight_path import FoldWeightReshapeTranspose
from tests.models import ops

X = np.random.default_rng(0).normal(size=(1, 4, 5, 5)).astype(np.float32)


def test_tf_depthwise_weight_chain_becomes_one_initializer() -> None:
    w_tf = np.random.default_rng(1).normal(size=(3, 3, 4, 1)).astype(np.float32)
    g = GraphBuilder()
    x = g.input("x", [1, 4, 5, 5])
    r = g.node("Reshape", [g.const(w_tf, "w_tf"), g.const(np.array([3, 3, 1, 4], np.int64), "shape")],
               name="reshape", out="r")
    t = g.node("Transpose", [r], name="transpose", out="t", perm=[3, 2, 0, 1])
    g.output(g.node("Conv", [x, t], name="conv", out="y", group=4))
    m = g.ir()
    want = run_model(m, {"x": X})[0]
    fold = FoldWeightReshapeTranspose()
    fold(m)
    assert ops(m) == ["Conv"] and fold.folded == 2
    assert tuple(m.graph.node(0).inputs[1].const_value.shape) == (4, 1, 3, 3)
    assert np.array_equal(run_model(m, {"x": X})[0], want)


def test_ops_on_activations_are_not_touched() -> None:
    g = GraphBuilder()
    g.output(g.node("Transpose", [g.input("x", [1, 4, 5, 5])], name="", out="y", perm=[0, 1, 3, 2]))
    m = g.ir()
    FoldWeightReshapeTranspose()(m)
    assert ops(m) == ["Transpose"]
