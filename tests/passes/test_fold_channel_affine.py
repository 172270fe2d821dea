from __future__ import annotations

import numpy as np
import pytest

from qdqkit.examples.graph import GraphBuilder, run_model
from qdqkit.passes.fold_channel_affine import FoldChannelAffineIntoConv
from tests.models import ops

RNG = np.random.default_rng(0)
X = RNG.normal(size=(1, 3, 6, 6)).astype(np.float32)


def _conv_then(chain: list[tuple[str, np.ndarray]], *, bias: bool = False) -> GraphBuilder:
    """x -> Conv(3 -> 4) -> each (op, constant) of ``chain`` -> Relu -> y."""
    g = GraphBuilder()
    g.input("x", [1, 3, 6, 6])
    g.output("y")
    g.const(RNG.normal(size=(4, 3, 3, 3)).astype(np.float32), "w")
    inputs = ["x", "w"]
    if bias:
        inputs.append(g.const(RNG.normal(size=4).astype(np.float32), "b"))
    y = g.node("Conv", inputs, name="conv", out="c", pads=[1, 1, 1, 1])
    for i, (op, constant) in enumerate(chain):
        y = g.node(op, [y, g.const(constant, f"k{i}")], name=f"{op.lower()}{i}", out=f"t{i}")
    g.node("Relu", [y], name="relu", out="y")
    return g


@pytest.mark.parametrize("shape", [(4, 1, 1), (1, 4, 1, 1), (1,), ()])
def test_a_per_channel_scale_and_shift_fold_into_the_conv(shape: tuple[int, ...]) -> None:
    scale = RNG.uniform(-2, 2, shape).astype(np.float32)
    shift = RNG.normal(size=shape).astype(np.float32)
    model = _conv_then([("Mul", scale), ("Add", shift)], bias=True).ir()
    want = run_model(model, {"x": X})[0]
    fold = FoldChannelAffineIntoConv()
    assert fold(model).modified
    assert ops(model) == ["Conv", "Relu"] and fold.folded == ["mul0", "add1"]
    conv = model.graph.node(0)
    assert conv.outputs[0].name == "t1"  # the Conv output took over the chain's name
    assert {"k0", "k1"}.isdisjoint(model.graph.initializers)  # folded constants are gone
    np.testing.assert_allclose(run_model(model, {"x": X})[0], want, rtol=1e-5, atol=1e-5)


def test_a_bias_add_alone_folds() -> None:
    model = _conv_then([("Add", RNG.normal(size=(1, 4, 1, 1)).astype(np.float32))]).ir()
    want = run_model(model, {"x": X})[0]
    FoldChannelAffineIntoConv()(model)
    assert ops(model) == ["Conv", "Relu"]
    np.testing.assert_allclose(run_model(model, {"x": X})[0], want, rtol=1e-5, atol=1e-5)


def test_constants_that_vary_over_space_or_batch_do_not_fold() -> None:
    for constant in (RNG.normal(size=(1, 4, 6, 6)), RNG.normal(size=(2, 4, 1, 1)),
                     RNG.normal(size=(6,))):
        model = _conv_then([("Mul", constant.astype(np.float32))]).ir()
        assert not FoldChannelAffineIntoConv()(model).modified
        assert ops(model) == ["Conv", "Mul", "Relu"]


def test_a_conv_output_read_elsewhere_or_a_computed_operand_does_not_fold() -> None:
    g = _conv_then([("Mul", np.full((4, 1, 1), 2.0, np.float32))])
    g.node("Sigmoid", ["c"], name="other", out="z")  # a second reader of the Conv output
    g.output("z")
    assert not FoldChannelAffineIntoConv()(g.ir()).modified
    g = GraphBuilder()
    g.input("x", [1, 3, 6, 6])
    g.input("s", [1, 4, 1, 1])
    g.output("y")
    w = g.const(RNG.normal(size=(4, 3, 3, 3)).astype(np.float32), "w")
    g.node("Mul", [g.node("Conv", ["x", w], pads=[1, 1, 1, 1]), "s"], out="y")
    assert not FoldChannelAffineIntoConv()(g.ir()).modified


def test_only_the_leading_mul_folds_when_the_add_is_not_constant() -> None:
    g = GraphBuilder()
    g.input("x", [1, 3, 6, 6])
    g.output("y")
    w = g.const(RNG.normal(size=(4, 3, 3, 3)).astype(np.float32), "w")
    c = g.node("Conv", ["x", w], pads=[1, 1, 1, 1])
    scaled = g.node("Mul", [c, g.const(np.full((4, 1, 1), 0.5, np.float32))])
    g.node("Add", [scaled, "x2"], out="y")
    g.input("x2", [1, 4, 6, 6])
    model = g.ir()
    feeds = {"x": X, "x2": RNG.normal(size=(1, 4, 6, 6)).astype(np.float32)}
    want = run_model(model, feeds)[0]
    FoldChannelAffineIntoConv()(model)
    assert ops(model) == ["Conv", "Add"]
    np.testing.assert_allclose(run_model(model, feeds)[0], want, rtol=1e-5, atol=1e-5)
