from __future__ import annotations

import numpy as np
from onnx import helper

from qdqkit.passes.fold_weight_path import FoldWeightReshapeTranspose
from tests.passes.pass_graphs import model, ops, run

X = np.random.default_rng(0).normal(size=(1, 4, 5, 5)).astype(np.float32)


def test_tf_depthwise_weight_chain_becomes_one_initializer() -> None:
    w_tf = np.random.default_rng(1).normal(size=(3, 3, 4, 1)).astype(np.float32)
    nodes = [
        helper.make_node("Reshape", ["w_tf", "shape"], ["r"], name="reshape"),
        helper.make_node("Transpose", ["r"], ["t"], name="transpose", perm=[3, 2, 0, 1]),
        helper.make_node("Conv", ["x", "t"], ["y"], name="conv", group=4),
    ]
    inits = {"w_tf": w_tf, "shape": np.array([3, 3, 1, 4], np.int64)}
    m = model(nodes, inits, {"x": [1, 4, 5, 5]}, ["y"])
    want = run(m, {"x": X})[0]
    fold = FoldWeightReshapeTranspose()
    fold(m)
    assert ops(m) == ["Conv"] and fold.folded == 2
    assert tuple(m.graph.node(0).inputs[1].const_value.shape) == (4, 1, 3, 3)
    assert np.array_equal(run(m, {"x": X})[0], want)


def test_ops_on_activations_are_not_touched() -> None:
    nodes = [helper.make_node("Transpose", ["x"], ["y"], perm=[0, 1, 3, 2])]
    m = model(nodes, {}, {"x": [1, 4, 5, 5]}, ["y"])
    FoldWeightReshapeTranspose()(m)
    assert ops(m) == ["Transpose"]
