from __future__ import annotations

from onnx import helper

from qdqkit.passes.name_nodes import NameUnnamedNodes, RenameNodeOutputs
from tests.passes.pass_graphs import model


def test_unnamed_nodes_get_unique_names() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["b"],
             name="Relu_0"), helper.make_node("Relu", ["b"], ["y"])]
    m = model(nodes, {}, {"x": [1]}, ["y"])
    NameUnnamedNodes()(m)
    assert [n.name for n in m.graph] == ["Relu_1", "Relu_0", "Relu_2"]


def test_rename_outputs_after_nodes_but_never_graph_outputs() -> None:
    nodes = [helper.make_node("Split", ["x"], ["s0", "s1"], name="split", axis=0, num_outputs=2),
             helper.make_node("Add", ["s0", "s1"], ["y"], name="add")]
    m = model(nodes, {}, {"x": [2]}, ["y"], opset=18)
    RenameNodeOutputs()(m)
    assert [v.name for v in m.graph.node(0).outputs] == ["split", "split_1"]
    assert m.graph.outputs[0].name == "y"
