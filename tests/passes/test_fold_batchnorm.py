from __future__ import annotations

import numpy as np
from onnx import helper

from qdqkit.passes.fold_batchnorm import FoldBatchNormIntoConv
from qdqkit.passes.scales import ScaleOrigin, ScaleTable
from tests.passes.pass_graphs import model, ops, run

RNG = np.random.default_rng(0)
X = RNG.normal(size=(1, 3, 6, 6)).astype(np.float32)


def _bn_params(c: int) -> dict[str, np.ndarray]:
    return {
        "gamma": RNG.uniform(0.5, 1.5, c).astype(np.float32),
        "beta": RNG.normal(0, 0.1, c).astype(np.float32),
        "mean": RNG.normal(0, 0.1, c).astype(np.float32),
        "var": RNG.uniform(0.5, 1.5, c).astype(np.float32),
    }


def test_conv_bn_folds_and_keeps_the_bn_output_name_and_scale() -> None:
    inits = {"w": RNG.normal(size=(4, 3, 3, 3)).astype(np.float32), **_bn_params(4)}
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["bn_out"],
                         name="bn", epsilon=1e-3),
        helper.make_node("Relu", ["bn_out"], ["y"], name="relu"),
    ]
    before = model(nodes, inits, {"x": [1, 3, 6, 6]}, ["y"])
    want = run(before, {"x": X})[0]
    scales = ScaleTable()
    bn_out = before.graph.node(1).outputs[0]
    scales.set(bn_out, 0.1, ScaleOrigin.QDQ, "q")
    fold = FoldBatchNormIntoConv(scales)
    fold(before)
    assert ops(before) == ["Conv", "Relu"] and fold.folded == ["bn"]
    conv = before.graph.node(0)
    assert conv.outputs[0].name == "bn_out" and scales.get(conv.outputs[0]) == 0.1
    assert np.allclose(run(before, {"x": X})[0], want, atol=1e-5)


def test_bn_not_after_a_conv_is_left_exactly_alone() -> None:
    inits = _bn_params(3)
    nodes = [
        helper.make_node("Add", ["x", "x"], ["a"], name="add"),
        helper.make_node("BatchNormalization", ["a", "gamma", "beta", "mean", "var"], ["bn_out"],
                         name="bn"),
        helper.make_node("Relu", ["bn_out"], ["y"], name="relu"),
    ]
    m = model(nodes, inits, {"x": [1, 3, 6, 6]}, ["y"])
    FoldBatchNormIntoConv()(m)
    assert ops(m) == ["Add", "BatchNormalization", "Relu"]
    assert [m.graph.node(1).inputs[0].name, m.graph.node(1).outputs[0].name] == ["a", "bn_out"]


def test_conv_output_with_a_second_reader_does_not_fold() -> None:
    inits = {"w": RNG.normal(size=(3, 3, 1, 1)).astype(np.float32), **_bn_params(3)}
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["b"]),
        helper.make_node("Add", ["b", "c"], ["y"]),
    ]
    m = model(nodes, inits, {"x": [1, 3, 6, 6]}, ["y"])
    FoldBatchNormIntoConv()(m)
    assert ops(m) == ["Conv", "BatchNormalization", "Add"]
