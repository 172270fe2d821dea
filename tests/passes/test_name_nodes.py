from __future__ import annotations

from qdqkit.examples.graph import GraphBuilder
from qdqkit.passes.name_nodes import NameUnnamedNodes, RenameNodeOutputs


def test_unnamed_nodes_get_unique_names() -> None:
    g = GraphBuilder()
    g.output(g.node("Relu", [g.node("Relu", [g.node("Relu", [g.input("x", [1])], name="", out="a")],
                                    name="Relu_0", out="b")], name="", out="y"))
    m = g.ir()
    NameUnnamedNodes()(m)
    assert [n.name for n in m.graph] == ["Relu_1", "Relu_0", "Relu_2"]


def test_rename_outputs_after_nodes_but_never_graph_outputs() -> None:
    g = GraphBuilder(opset=18)
    s0 = g.node("Split", [g.input("x", [2])], name="split", out="s", outputs=2, axis=0,
                num_outputs=2)
    g.output(g.node("Add", [s0, "s1"], name="add", out="y"))
    m = g.ir()
    RenameNodeOutputs()(m)
    assert [v.name for v in m.graph.node(0).outputs] == ["split", "split_1"]
    assert m.graph.outputs[0].name == "y"
