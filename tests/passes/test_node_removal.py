from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from qdqkit.examples.graph import GraphBuilder
from qdqkit.passes.node_removal import remove_together
from qdqkit.passes.scales import ScaleTable
from qdqkit.passes.strip_qdq import StripQdqPairs
from tests.models import ops


def _chain() -> ir.Model:
    # x -> Relu a -> Abs c -> y, and a -> Mul b (with Constant k) whose output nobody reads
    g = GraphBuilder()
    x = g.input("x", [1, 3])
    a = g.node("Relu", [x], name="a", out="a_out")
    k = g.constant(np.array(2.0, np.float32), out="k")
    g.node("Mul", [a, k], name="b", out="b_out")
    g.output(g.node("Abs", [a], name="c", out="y"))
    return g.ir()


def _node(model: ir.Model, name: str) -> ir.Node:
    return next(n for n in model.graph if n.name == name)


def test_removes_the_set_and_keeps_use_lists_of_surviving_values_exact() -> None:
    m = _chain()
    mul = _node(m, "b")
    constant = mul.inputs[1].producer()
    relu_out = _node(m, "a").outputs[0]
    assert constant is not None and len(relu_out.uses()) == 2
    remove_together(m.graph, [mul, constant])
    assert ops(m) == ["Relu", "Abs"]
    assert [u.node.name for u in relu_out.uses()] == ["c"]  # the surviving value forgot Mul


def test_refuses_a_set_whose_output_someone_else_reads() -> None:
    m = _chain()
    with pytest.raises(ValueError, match="still read"):
        remove_together(m.graph, [_node(m, "a")])  # Abs and Mul read it
    with pytest.raises(ValueError, match="still read"):
        remove_together(m.graph, [_node(m, "c")])  # a graph output
    assert ops(m) == ["Relu", "Constant", "Mul", "Abs"]  # nothing changed


def test_strip_can_take_the_scale_constants_along() -> None:
    g = GraphBuilder()
    x = g.input("x", [1, 3])
    s = g.constant(np.array(0.05, np.float32), out="s")
    z = g.constant(np.array(0, np.int8), out="z")
    q = g.node("QuantizeLinear", [x, s, z], name="q", out="xq")
    g.output(g.node("Relu", [g.node("DequantizeLinear", [q, s, z], name="dq", out="xd")],
                    name="r", out="y"))
    kept, dropped = g.ir(), g.ir()
    StripQdqPairs(ScaleTable())(kept)
    StripQdqPairs(ScaleTable(), remove_dead_constants=True)(dropped)
    assert ops(kept) == ["Constant", "Constant", "Relu"]
    assert ops(dropped) == ["Relu"]
    assert [u.node.name for u in dropped.graph.inputs[0].uses()] == ["r"]
