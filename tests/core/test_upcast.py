from __future__ import annotations

import numpy as np
import onnx_ir as ir
from onnx import TensorProto

from qdqkit.core.numerics import error_metrics, input_specs, make_session, random_feeds, run
from qdqkit.core.upcast import upcast_float16
from qdqkit.examples.builder import demo_network
from qdqkit.examples.graph import GraphBuilder


def test_upcast_leaves_no_fp16_and_computes_the_same_function() -> None:
    model = ir.serde.deserialize_model(demo_network("modelopt"))
    session = make_session(model)
    feeds = random_feeds(input_specs(session), seed=5)
    before = run(session, feeds)["logits"]
    assert upcast_float16(model)
    assert not upcast_float16(model), "a second upcast has nothing left to change"
    for value in model.graph.initializers.values():
        assert value.const_value is not None and value.const_value.dtype != ir.DataType.FLOAT16
    for node in model.graph:
        assert all(o.dtype != ir.DataType.FLOAT16 for o in node.outputs)
    after = run(make_session(model), feeds)["logits"]
    # The same function without fp16 rounding. How far onnxruntime's fp16 kernels drift from fp32
    # depends on its version (up to ~10% per logit on 1.23), so only the direction is compared.
    assert error_metrics(after, before).cosine > 0.99


def test_upcast_is_exact_where_fp16_is_exact() -> None:
    g = GraphBuilder()
    h = g.node("Cast", [g.input("x", [4])], name="", out="h", to=TensorProto.FLOAT16)
    m = g.node("Mul", [h, g.const(np.array(0.5, np.float16), "half")], name="", out="m")
    g.node("Cast", [m], name="", out="y", to=TensorProto.FLOAT)
    g.output("y", [4])
    model = g.ir()
    assert upcast_float16(model)
    assert model.graph.initializers["half"].const_value.dtype == ir.DataType.FLOAT  # type: ignore[union-attr]
    x = np.array([1.0, -2.0, 3.5, 1e-3], np.float32)  # 1e-3 is not an fp16 value: fp32 keeps it
    y = run(make_session(model), {"x": x})["y"]
    np.testing.assert_array_equal(y, x * np.float32(0.5))


def test_float32_model_is_left_alone() -> None:
    model = ir.serde.deserialize_model(demo_network("trt"))
    assert not upcast_float16(model)


def test_upcasting_a_clone_leaves_the_original_types_alone() -> None:
    """onnx-ir clones share their values' type objects with the original: retyping through
    them changed the original model, which then declared float32 outputs for fp16 nodes."""
    g = GraphBuilder()
    h = g.node("Cast", [g.input("x", [4])], name="", out="h", to=TensorProto.FLOAT16)
    g.node("Cast", [g.node("Relu", [h], name="", out="r")], name="", out="y",
           to=TensorProto.FLOAT)
    g.output("y", [4])
    model = g.ir()
    relu = next(n for n in model.graph if n.op_type == "Relu")
    relu.outputs[0].dtype = ir.DataType.FLOAT16
    clone = model.clone()
    assert upcast_float16(clone)
    assert relu.outputs[0].dtype == ir.DataType.FLOAT16
    assert next(n for n in clone.graph if n.op_type == "Relu").outputs[0].dtype == ir.DataType.FLOAT
