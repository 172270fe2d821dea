"""ConstantsToInitializers before/after: same outputs, weights stored as initializers."""

from __future__ import annotations

import numpy as np
from onnx_ir import serde

from qdqkit.core.numerics import make_session
from qdqkit.examples.graph import GraphBuilder
from qdqkit.passes.constants_to_initializers import ConstantsToInitializers


def test_constant_weights_become_initializers_and_inputs_are_cleaned() -> None:
    g = GraphBuilder("consts", seed=0)
    x = g.input("x", [1, 4, 5, 5])
    w = g.constant(g.rng.normal(size=(4, 4, 3, 3)).astype(np.float32))
    g.node("Conv", [x, w], out="y", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    g.output("y", [1, 4, 5, 5])
    bias = g.const(np.zeros(4, np.float32), "listed")
    g.input("listed", [4])  # an IR-3 style initializer also listed as an input
    g.nodes[-1].input.append(bias)
    proto = g.proto()
    feeds = {"x": np.random.default_rng(1).normal(size=(1, 4, 5, 5)).astype(np.float32)}
    expected = make_session(proto.SerializeToString()).run(None, feeds)[0]
    model = serde.deserialize_model(proto)
    assert ConstantsToInitializers()(model).modified
    assert not any(n.op_type == "Constant" for n in model.graph)
    conv = next(n for n in model.graph if n.op_type == "Conv")
    assert conv.inputs[1].const_value is not None
    assert [v.name for v in model.graph.inputs] == ["x"]
    np.testing.assert_array_equal(make_session(model).run(None, feeds)[0], expected)
