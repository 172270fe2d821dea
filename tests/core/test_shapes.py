"""Shape inference as a table: the model is never changed."""

from __future__ import annotations

import onnx_ir as ir

from qdqkit.core.shapes import infer_value_types
from qdqkit.examples.graph import GraphBuilder
from qdqkit.trt.predict import predict_engine


def _model() -> ir.Model:
    g = GraphBuilder()
    y = g.node("Relu", [g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 64, name="conv")], name="r")
    g.output(g.conv(g.qdq(y, 0.2), 64, 32, name="next"))
    return g.ir()


def test_inferred_shapes_come_back_as_a_table() -> None:
    model = _model()
    relu = next(node for node in model.graph if node.name == "r").outputs[0]
    assert relu.shape is None
    types = infer_value_types(model)
    assert types.shape_of(relu) == ir.Shape([1, 64, 8, 8])
    assert types.dtype_of(relu) == ir.DataType.FLOAT
    assert relu.shape is None and relu.dtype is None


def test_predicting_an_in_memory_model_leaves_it_byte_identical() -> None:
    model = _model()
    before = ir.serde.serialize_model(model).SerializeToString()
    engine = predict_engine(model)
    assert ir.serde.serialize_model(model).SerializeToString() == before
    conv = next(layer for layer in engine.layers if "next" in layer.onnx_nodes)
    assert conv.inputs[0].shape == (1, 64, 8, 8)  # the inferred shapes were still used
    assert conv.cost is not None and conv.cost.macs == 8 * 8 * 32 * 64 * 9


def test_stored_shapes_that_contradict_the_ops_are_inferred_afresh() -> None:
    """A stored rank-0 shape in front of a Conv would leave the Conv unshaped; inference retries."""
    import numpy as np
    import onnx_ir as ir
    from onnx import TensorProto, helper, numpy_helper

    from qdqkit.core.shapes import infer_value_types

    weight = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Conv", ["r", "w"], ["y"], name="conv")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [weight],
        value_info=[helper.make_tensor_value_info("r", TensorProto.FLOAT, [])],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model = ir.serde.deserialize_model(proto)
    before = ir.serde.serialize_model(model).SerializeToString()
    types = infer_value_types(model)
    conv = next(n for n in model.graph if n.op_type == "Conv")
    relu = next(n for n in model.graph if n.op_type == "Relu")
    assert tuple(types.shape_of(conv.outputs[0]) or ()) == (1, 4, 6, 6)
    assert tuple(types.shape_of(relu.outputs[0]) or ()) == (1, 3, 8, 8)
    assert ir.serde.serialize_model(model).SerializeToString() == before


def test_a_reshape_to_a_computed_shape_is_sized_at_opset_13() -> None:
    """Shape -> Slice -> Concat -> Reshape, as Paddle and traced PyTorch exports write it, then a
    conv on the result: ONNX's Reshape-13 inference ignores the computed shape, so the conv's
    input must not end unsized. Truth: the shapes onnxruntime gives when it runs the model."""
    import numpy as np
    import onnxruntime as ort

    g = GraphBuilder("computed_reshape", opset=13)
    x = g.input("x", [1, 8, 4, 6])
    dims = g.node("Shape", [x], name="shape")
    head = g.node("Slice", [dims, g.const(np.array([0])), g.const(np.array([2])),
                            g.const(np.array([0]))], name="head")
    target = g.node("Concat", [head, g.const(np.array([2, -1]))], name="target", axis=0)
    folded = g.node("Reshape", [x, target], name="fold")
    y = g.conv(g.qdq(folded), 8, 16, name="conv")
    g.output(y)
    model = g.ir()
    conv = next(node for node in model.graph if node.name == "conv")
    session = ort.InferenceSession(g.proto().SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    ran = session.run(None, {"x": np.zeros((1, 8, 4, 6), np.float32)})[0]
    types = infer_value_types(model)
    assert types.shape_of(conv.inputs[0]) == ir.Shape([1, 8, 2, 12])
    assert types.shape_of(conv.outputs[0]) == ir.Shape(list(ran.shape))
