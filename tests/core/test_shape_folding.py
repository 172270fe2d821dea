"""Shape arithmetic folded once the input shapes are known (``core.shape_folding``), checked
against onnxruntime running the same graphs: every folded value and every shape inferred
through them is what a run computes."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto

from qdqkit.core.numerics import make_session, run
from qdqkit.core.shape_folding import fold_shape_values
from qdqkit.core.shapes import infer_value_types
from qdqkit.examples.graph import GraphBuilder


def _bert_embedding_pattern(width: int = 16, heads: int = 4, out: int = 8) -> GraphBuilder:
    """Traced PyTorch's position ids (a buffer sliced to the input's length) and an attention
    Reshape whose target is built from Shape/Gather/Concat, as a BERT export writes them."""
    g = GraphBuilder("positions", seed=0, opset=17)
    x = g.input("x", ["batch", "tokens", width])
    length = g.node("Unsqueeze", [g.node("Gather", [g.node("Shape", [x]), g.const(np.int64(1))]),
                                  g.const(np.array([0], np.int64))])
    ids = g.node("Slice", [g.const(np.arange(64, dtype=np.int64)[None, :], "position_ids"),
                           g.const(np.array([0], np.int64)), length,
                           g.const(np.array([1], np.int64))])
    table = g.const(g.rng.normal(0, 1, (64, width)).astype(np.float32), "table")
    y = g.node("Add", [x, g.node("Gather", [table, ids])])
    shape = g.node("Shape", [y])
    dims = [g.node("Unsqueeze", [g.node("Gather", [shape, g.const(np.int64(i))]),
                                 g.const(np.array([0], np.int64))]) for i in (0, 1)]
    split = g.const(np.array([heads, width // heads], np.int64))
    per_head = g.node("Reshape", [y, g.node("Concat", [*dims, split], axis=0)])
    w = g.const(g.rng.normal(0, 1, (width // heads, out)).astype(np.float32), "w")
    g.node("MatMul", [per_head, w], out="out")
    g.output("out")
    return g


def _untyped_outputs(g: GraphBuilder) -> bytes:
    """The model with its outputs' types left to onnxruntime (the builder declares float)."""
    proto = g.proto()
    names = [o.name for o in proto.graph.output]
    del proto.graph.output[:]
    proto.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in names)
    return proto.SerializeToString()


def _at_shapes(model: ir.Model, dims: list[int]) -> ir.Model:
    model.graph.inputs[0].shape = ir.Shape(dims)
    for node in model.graph:
        for value in node.outputs:
            value.shape = None
    return model


def test_a_traced_position_slice_and_attention_reshape_are_sized_as_a_run_sizes_them() -> None:
    builder = _bert_embedding_pattern()
    model = _at_shapes(builder.ir(), [2, 5, 16])
    # Without folding ONNX inference leaves the sliced ids, and all after them, unsized.
    plain = onnx.shape_inference.infer_shapes(builder.proto(), data_prop=True)
    assert not all(d.HasField("dim_value") for v in plain.graph.value_info
                   for d in v.type.tensor_type.shape.dim)
    types = infer_value_types(model)
    names = [v.name for node in model.graph for v in node.outputs if v.name]
    traced = builder.proto()
    traced.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in names
                               if n != "out")
    x = np.random.default_rng(1).normal(0, 1, (2, 5, 16)).astype(np.float32)
    ran = run(make_session(traced.SerializeToString()), {"x": x})
    for node in model.graph:
        for value in node.outputs:
            shape = types.shape_of(value)
            assert shape is not None and list(shape) == list(ran[value.name].shape), value.name


@pytest.mark.parametrize("op, inputs, attributes", [
    ("Gather", [np.arange(12, dtype=np.int64).reshape(3, 4), np.array([-1, 0], np.int64)],
     {"axis": 1}),
    ("Slice", [np.arange(10, dtype=np.int64), np.array([-2], np.int64),
               np.array([-(2 ** 62)], np.int64), np.array([0], np.int64),
               np.array([-3], np.int64)], {}),
    ("Slice", [np.arange(10, dtype=np.int64).reshape(2, 5), np.array([1], np.int64),
               np.array([2 ** 62], np.int64), np.array([1], np.int64)], {}),
    ("Div", [np.array([-7, 7, -8], np.int64), np.array([2, -2, 3], np.int64)], {}),
    ("Range", [np.array(1, np.int64), np.array(10, np.int64), np.array(3, np.int64)], {}),
    ("Expand", [np.array([[1], [2]], np.int64), np.array([2, 3], np.int64)], {}),
    ("Reshape", [np.arange(12, dtype=np.int64).reshape(3, 4), np.array([0, -1, 2], np.int64)],
     {}),
    ("Where", [np.array([True, False]), np.array([1, 2], np.int64), np.array([5, 6], np.int64)],
     {}),
    ("Unsqueeze", [np.array([3, 4], np.int64), np.array([-1, 0], np.int64)], {}),
    ("Squeeze", [np.array([[[3, 4]]], np.int64), np.array([0, 1], np.int64)], {}),
    ("Concat", [np.array([1], np.int64), np.array([2, 3], np.int64)], {"axis": 0}),
    ("Cast", [np.array([1.7, -2.2], np.float32)], {"to": TensorProto.INT64}),
    ("ConstantOfShape", [np.array([2, 3], np.int64)],
     {"value": onnx.numpy_helper.from_array(np.array([7], np.int64))}),
    ("Max", [np.array([1, 9], np.int64), np.array([4, 2], np.int64)], {}),
    ("Equal", [np.array([1, 9], np.int64), np.array([1, 2], np.int64)], {}),
    ("Mod", [np.array([-7, 7, 5], np.int64), np.array([3, -3, 7], np.int64)], {}),
    ("Mod", [np.array([-7, 7, 5], np.int64), np.array([3, -3, 7], np.int64)], {"fmod": 1}),
    ("ReduceProd", [np.array([[2, 3], [4, 5]], np.int64)], {"axes": [1], "keepdims": 0}),
    ("ReduceProd", [np.array([2, 3, 7], np.int64)], {}),
    ("Floor", [np.array([-1.5, 2.5, 3.0], np.float32)], {}),
])
def test_each_folded_op_computes_what_onnxruntime_computes(
        op: str, inputs: list[np.ndarray], attributes: dict[str, object]) -> None:
    g = GraphBuilder(f"one_{op}", opset=17)
    names = [g.const(array, f"in{i}") for i, array in enumerate(inputs)]
    g.node(op, names, out="y", **attributes)
    g.output("y")
    want = run(make_session(_untyped_outputs(g)), {})["y"]
    model = g.ir()
    model.graph.outputs.clear()  # a graph output is never folded
    got = fold_shape_values(model.graph, lambda value: None, {})["y"]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_a_shape_start_and_end_and_a_size_read_the_known_shape() -> None:
    g = GraphBuilder("shape_parts", opset=17)
    x = g.input("x", [2, 3, 4, 5])
    g.node("Shape", [x], out="tail", start=-2)
    g.node("Shape", [x], out="middle", start=1, end=3)
    g.node("Size", [x], out="size")
    for name in ("tail", "middle", "size"):
        g.output(name)
    model = g.ir()
    folded = fold_shape_values(model.graph, lambda value: [2, 3, 4, 5] if value.name == "x"
                               else None, {})
    ran = run(make_session(_untyped_outputs(g)), {"x": np.zeros((2, 3, 4, 5), np.float32)})
    # Graph outputs stay as they are: only values nodes read are folded.
    assert folded == {}
    model.graph.outputs.clear()
    folded = fold_shape_values(model.graph, lambda value: [2, 3, 4, 5] if value.name == "x"
                               else None, {})
    for name in ("tail", "middle", "size"):
        np.testing.assert_array_equal(folded[name], ran[name])


def test_nothing_computed_from_input_data_is_folded() -> None:
    g = GraphBuilder("data_dependent", opset=17)
    x = g.input("x", [4], dtype=TensorProto.INT64)
    g.node("Add", [x, g.const(np.array([1], np.int64))], out="y")
    g.node("Range", [g.const(np.int64(0)), g.node("ReduceMax", [g.node("Cast", [x], to=1)],
                                                      keepdims=0), g.const(np.int64(1))],
           out="z")
    g.output("y")
    g.output("z")
    model = g.ir()
    model.graph.outputs.clear()
    assert fold_shape_values(model.graph, lambda value: [4], {}) == {}


def test_inspect_sizes_an_export_with_symbolic_stored_shapes_at_the_shapes_given(
        tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A model that stores its intermediate shapes with symbolic dimensions (as exporters and
    quantizers write them), shape arithmetic inside: given the input shapes, the stored symbolic
    ones give way to inference, and every weighted op is sized."""
    from qdqkit.inspection import inspect_model

    stored = onnx.shape_inference.infer_shapes(_bert_embedding_pattern().proto())
    assert any(d.dim_param for v in stored.graph.value_info
               for d in v.type.tensor_type.shape.dim)  # the premise
    path = tmp_path / "m.onnx"
    onnx.save(stored, path)
    report = inspect_model(str(path), shapes={"x": [2, 5, 16]})
    assert [w.macs for w in report.weighted_ops] == [2 * 5 * 4 * 4 * 8]
    assert report.int8_mac_share == 0.0
