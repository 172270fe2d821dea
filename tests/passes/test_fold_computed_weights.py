"""FoldComputedWeights: weights computed from constants become stored initializers."""

from __future__ import annotations

import numpy as np
import onnx.numpy_helper

from qdqkit.core.numerics import make_session
from qdqkit.examples.graph import GraphBuilder
from qdqkit.passes.fold_computed_weights import FoldComputedWeights


def _computed_weight_model(domain: str = "") -> GraphBuilder:
    """Conv whose weight is ConstantOfShape(shape) * a constant (caffe2-style stub weights)."""
    g = GraphBuilder("computed", opset=13, seed=0)
    x = g.input("x", [1, 16, 8, 8])
    ones = g.node("ConstantOfShape", [g.const(np.array([16, 16, 3, 3], np.int64))],
                  value=onnx.numpy_helper.from_array(np.array([1.0], np.float32)))
    factor = g.const(g.rng.normal(size=(16, 1, 1, 1)).astype(np.float32))
    if domain:
        g.use_domain(domain, 1)
        weight = g.node("Scale", [ones, factor], domain=domain)
    else:
        weight = g.node("Mul", [ones, factor])
    g.node("Conv", [x, weight], name="conv", out="y", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    g.output("y", [1, 16, 8, 8])
    return g


def test_computed_weight_becomes_an_initializer_with_the_same_values() -> None:
    g = _computed_weight_model()
    feeds = {"x": np.random.default_rng(1).normal(size=(1, 16, 8, 8)).astype(np.float32)}
    expected = g.run(feeds)[0]
    model = g.ir()
    folding = FoldComputedWeights()
    assert folding(model).modified
    conv = next(n for n in model.graph if n.op_type == "Conv")
    assert conv.inputs[1].const_value is not None and conv.inputs[1].name in folding.folded
    assert [n.op_type for n in model.graph] == ["Conv"]  # the computing nodes are gone
    np.testing.assert_allclose(make_session(model).run(None, feeds)[0], expected, rtol=1e-6)


def test_weight_from_a_custom_op_is_left_alone() -> None:
    model = _computed_weight_model(domain="example.custom").ir()
    before = [n.op_type for n in model.graph]
    assert not FoldComputedWeights()(model).modified
    assert [n.op_type for n in model.graph] == before


def test_computed_batchnorm_parameters_are_stored_so_the_bn_folds() -> None:
    # caffe2's stub models compute a BatchNormalization's scale, bias, mean and variance with
    # ConstantOfShape too; stored, the BN folds into its conv as TensorRT builds it.
    g = GraphBuilder("computed_bn", opset=13, seed=0)
    x = g.input("x", [1, 8, 4, 4])
    y = g.conv(x, 8, 8, weight="float", name="conv")
    params = [g.node("ConstantOfShape", [g.const(np.array([8], np.int64))],
                     value=onnx.numpy_helper.from_array(np.array([v], np.float32)))
              for v in (1.5, 0.25, 0.1, 2.0)]
    g.node("BatchNormalization", [y, *params], name="bn", out="z")
    g.output("z", [1, 8, 4, 4])
    feeds = {"x": np.random.default_rng(2).normal(size=(1, 8, 4, 4)).astype(np.float32)}
    expected = g.run(feeds)[0]
    model = g.ir()
    assert FoldComputedWeights()(model).modified
    bn = next(n for n in model.graph if n.op_type == "BatchNormalization")
    assert all(v is not None and v.const_value is not None for v in bn.inputs[1:])
    assert [n.op_type for n in model.graph] == ["Conv", "BatchNormalization"]
    np.testing.assert_allclose(make_session(model).run(None, feeds)[0], expected, rtol=1e-6)
