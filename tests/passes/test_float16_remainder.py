"""Float16Remainder before/after: the FP16 model computes what the float one does."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from qdqkit.core.numerics import make_session
from qdqkit.examples.graph import GraphBuilder
from qdqkit.passes.float16_remainder import Float16Remainder


def _model() -> GraphBuilder:
    g = GraphBuilder("mixed", opset=19, seed=0)
    x = g.input("x", [1, 8, 6, 6])
    y = g.node("Relu", [g.conv(x, 8, 8, weight="float")])
    y = g.node("Resize", [y, "", g.const(np.array([1, 1, 2, 2], np.float32))], mode="nearest")
    m = g.node("ReduceMean", [g.node("Pow", [y, g.const(np.float32(2))]),
                              g.const(np.array([1], np.int64))])
    g.node("Add", [y, m], out="out")
    g.output("out", [1, 8, 12, 12])
    return g


def test_fp16_remainder_runs_and_matches_float() -> None:
    g = _model()
    model = g.ir()
    feeds = {"x": np.random.default_rng(0).normal(size=(1, 8, 6, 6)).astype(np.float32)}
    expected = g.run(feeds)[0]
    remainder = Float16Remainder()
    remainder(model)
    kinds = {n.op_type: n.outputs[0].dtype for n in model.graph}
    assert kinds["Conv"] == ir.DataType.FLOAT16 and kinds["Relu"] == ir.DataType.FLOAT16
    assert kinds["Pow"] == ir.DataType.FLOAT and kinds["ReduceMean"] == ir.DataType.FLOAT
    assert set(remainder.kept_fp32) == {n.name for n in model.graph
                                        if n.op_type in ("Pow", "ReduceMean")}
    resize = next(n for n in model.graph if n.op_type == "Resize")
    assert resize.inputs[2].dtype == ir.DataType.FLOAT or (
        resize.inputs[2].const_value.dtype == ir.DataType.FLOAT)  # C14: scales stay float32
    assert model.graph.inputs[0].dtype == ir.DataType.FLOAT
    assert model.graph.outputs[0].dtype == ir.DataType.FLOAT and model.graph.outputs[0].name == "out"
    got = make_session(model).run(None, feeds)[0]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=2e-2, atol=2e-2)


def test_observed_overflow_keeps_the_node_fp32() -> None:
    g = _model()
    model = g.ir()
    relu = next(n for n in model.graph if n.op_type == "Relu")
    remainder = Float16Remainder({relu.outputs[0].name: (0.0, 1e5)})
    remainder(model)
    assert "65504" in remainder.kept_fp32[relu.name]
    assert relu.outputs[0].dtype == ir.DataType.FLOAT
