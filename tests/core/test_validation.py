"""Up-front validation: every invalid graph is refused in one line naming the node, never translated."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from qdqkit.core.errors import ModelLoadError, QdqkitError
from qdqkit.translation import translate


def _model(nodes: list[onnx.NodeProto], opset: int = 13,
           initializers: tuple[onnx.TensorProto, ...] = ()) -> onnx.ModelProto:
    scale = helper.make_tensor("s", TensorProto.FLOAT, [], [0.1])
    zero = helper.make_tensor("z", TensorProto.INT8, [], [0])
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [scale, zero, *initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _q(x: str, out: str, name: str = "q", **attrs: int) -> onnx.NodeProto:
    return helper.make_node("QuantizeLinear", [x, "s", "z"], [out], name=name, **attrs)


def _dq(x: str, out: str, name: str = "dq", **attrs: int) -> onnx.NodeProto:
    return helper.make_node("DequantizeLinear", [x, "s", "z"], [out], name=name, **attrs)


BIG = 2**40
CASES = {
    "cycle": (_model([_q("y", "xq"), _dq("xq", "y")]), r"'q' is on a cycle"),
    "undefined input": (_model([_q("x", "xq"), _dq("xq", "t"),
                                helper.make_node("Add", ["t", "nowhere"], ["y"], name="add")]),
                        r"Add 'add' reads 'nowhere', which no node"),
    "empty Q input": (_model([_q("", "xq"), _dq("xq", "y")]), r"QuantizeLinear 'q'.*empty"),
    "duplicate names": (_model([_q("x", "xq", name="n"), _dq("xq", "y", name="n")]),
                        r"two nodes are named 'n'"),
    "Q at opset 9": (_model([_q("x", "xq"), _dq("xq", "y")], opset=9),
                     r"QuantizeLinear 'q'.*No Op registered"),
    "DQ axis at opset 11": (_model([_q("x", "xq"), _dq("xq", "y", axis=1)], opset=11),
                            r"DequantizeLinear 'dq'.*axis.*needs opset 13"),
    "Constant of 2^40 elements": (
        _model([helper.make_node("Constant", [], ["c"], name="const", value=onnx.TensorProto(
            name="v", data_type=TensorProto.FLOAT, dims=[BIG], raw_data=b"\0" * 4)),
            _q("x", "xq"), _dq("xq", "t"), helper.make_node("Add", ["t", "c"], ["y"], name="a")]),
        r"Constant 'const'.*too small"),
    "scale of 2^40 elements holding one": (
        _model([_q("x", "xq"), _dq("xq", "y")], initializers=(onnx.TensorProto(
            name="big", data_type=TensorProto.FLOAT, dims=[BIG], float_data=[1.0]),)),
        r"'big' holds 1 values but its shape \[1099511627776\] needs"),
    "negative weight dims": (
        _model([_q("x", "xq"), _dq("xq", "y")], initializers=(onnx.TensorProto(
            name="w", data_type=TensorProto.FLOAT, dims=[4, -2]),)),
        r"'w' has negative dimensions"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_invalid_graphs_are_refused_naming_the_node(tmp_path: Path, case: str) -> None:
    model, message = CASES[case]
    path = tmp_path / "bad.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(QdqkitError, match=message) as caught:
        translate(path, tmp_path / "out")
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_an_unsorted_graph_is_sorted_not_refused(tmp_path: Path) -> None:
    model = _model([_dq("xq", "y"), _q("x", "xq")])
    path = tmp_path / "unsorted.onnx"
    path.write_bytes(model.SerializeToString())
    assert translate(path, tmp_path / "out").qdq_removed == 2


@pytest.mark.parametrize("char", ["\n", "\r", "\x07"])
def test_control_characters_in_names_are_refused(tmp_path: Path, char: str) -> None:
    name = f"x{char}y"
    nodes = [_q("x", "xq"), _dq("xq", "t"), helper.make_node("Relu", ["t"], [name], name="r"),
             helper.make_node("QuantizeLinear", [name, "s", "z"], ["rq"], name="q2"),
             helper.make_node("DequantizeLinear", ["rq", "s", "z"], ["t2"], name="dq2"),
             helper.make_node("Relu", ["t2"], ["y"], name="last")]
    path = tmp_path / "names.onnx"
    path.write_bytes(_model(nodes).SerializeToString())
    with pytest.raises(QdqkitError, match="control character") as caught:
        translate(path, tmp_path / "out")
    assert str(path) in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_validation_reads_no_weight(tmp_path: Path) -> None:
    from qdqkit.core.model_io import load_model
    from qdqkit.core.validation import validate_model

    weight = np.ones((256, 256), np.float32)
    model = _model([_q("x", "xq"), _dq("xq", "y")],
                   initializers=(onnx.numpy_helper.from_array(weight, "w"),))
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    loaded = load_model(path)
    validate_model(loaded, str(path))  # a valid model passes
    with pytest.raises(ModelLoadError):
        bad = loaded.graph.node(0)
        bad.name = loaded.graph.node(1).name = "same"
        validate_model(loaded, str(path))
