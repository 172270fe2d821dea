from __future__ import annotations

import numpy as np

from qdqkit.examples.graph import GraphBuilder, run_model
from qdqkit.passes.fold_batchnorm import FoldBatchNormIntoConv
from qdqkit.passes.scales import ScaleOrigin, ScaleTable
from tests.models import ops

RNG = np.random.default_rng(0)
X = RNG.normal(size=(1, 3, 6, 6)).astype(np.float32)


def _graph(inits: dict[str, np.ndarray]) -> GraphBuilder:
    g = GraphBuilder()
    g.input("x", [1, 3, 6, 6])
    g.output("y")
    for name, array in inits.items():
        g.const(array, name)
    return g


def _bn_params(c: int) -> dict[str, np.ndarray]:
    return {
        "gamma": RNG.uniform(0.5, 1.5, c).astype(np.float32),
        "beta": RNG.normal(0, 0.1, c).astype(np.float32),
        "mean": RNG.normal(0, 0.1, c).astype(np.float32),
        "var": RNG.uniform(0.5, 1.5, c).astype(np.float32),
    }


def test_conv_bn_folds_and_keeps_the_bn_output_name_and_scale() -> None:
    inits = {"w": RNG.normal(size=(4, 3, 3, 3)).astype(np.float32), **_bn_params(4)}
    g = _graph(inits)
    c = g.node("Conv", ["x", "w"], name="conv", out="c", pads=[1, 1, 1, 1])
    bn = g.node("BatchNormalization", [c, "gamma", "beta", "mean", "var"], name="bn", out="bn_out",
                epsilon=1e-3)
    g.node("Relu", [bn], name="relu", out="y")
    before = g.ir()
    want = run_model(before, {"x": X})[0]
    scales = ScaleTable()
    bn_out = before.graph.node(1).outputs[0]
    scales.set(bn_out, 0.1, ScaleOrigin.QDQ, "q")
    fold = FoldBatchNormIntoConv(scales)
    fold(before)
    assert ops(before) == ["Conv", "Relu"] and fold.folded == ["bn"]
    conv = before.graph.node(0)
    assert conv.outputs[0].name == "bn_out" and scales.get(conv.outputs[0]) == 0.1
    assert np.allclose(run_model(before, {"x": X})[0], want, atol=1e-5)


def test_bn_not_after_a_conv_is_left_exactly_alone() -> None:
    inits = _bn_params(3)
    g = _graph(inits)
    a = g.node("Add", ["x", "x"], name="add", out="a")
    bn = g.node("BatchNormalization", [a, "gamma", "beta", "mean", "var"], name="bn", out="bn_out")
    g.node("Relu", [bn], name="relu", out="y")
    m = g.ir()
    FoldBatchNormIntoConv()(m)
    assert ops(m) == ["Add", "BatchNormalization", "Relu"]
    assert [m.graph.node(1).inputs[0].name, m.graph.node(1).outputs[0].name] == ["a", "bn_out"]


def test_conv_output_with_a_second_reader_does_not_fold() -> None:
    inits = {"w": RNG.normal(size=(3, 3, 1, 1)).astype(np.float32), **_bn_params(3)}
    g = _graph(inits)
    c = g.node("Conv", ["x", "w"], name="conv", out="c")
    b = g.node("BatchNormalization", [c, "gamma", "beta", "mean", "var"], name="", out="b")
    g.node("Add", [b, c], name="", out="y")
    m = g.ir()
    FoldBatchNormIntoConv()(m)
    assert ops(m) == ["Conv", "BatchNormalization", "Add"]
