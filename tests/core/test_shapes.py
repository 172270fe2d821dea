"""Shape inference as a table: the model is never changed."""

from __future__ import annotations

import onnx_ir as ir

from qdqkit.core.shapes import infer_value_types
from qdqkit.trt.predict import predict_engine
from tests.linting.graphs import G


def _model() -> ir.Model:
    g = G()
    y = g.op("Relu", [g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 64, name="conv")], name="r")
    g.output(g.conv(g.qdq(y, 0.2), 64, 32, name="next"))
    return g.model()


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
