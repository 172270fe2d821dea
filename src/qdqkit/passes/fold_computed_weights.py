"""FoldComputedWeights: store the weights a model computes from constants at run time.

Some exporters compute weights instead of storing them (caffe2's ConstantOfShape stubs, a TF
export's Mul or Concat of constants). Quantizing a weight needs its values, so:
1. A weighted op's (Conv, ConvTranspose, Gemm, MatMul) input, or a BatchNormalization's scale,
   bias, mean or variance, computed only from constants, by any deterministic op of the standard
   domains, is evaluated once with onnxruntime and becomes an initializer under the same name;
   its readers read that instead (a stored BatchNormalization then folds into its conv).
2. The nodes that computed it are removed when nothing else reads their outputs.
3. A value that is a graph output, or that onnxruntime cannot compute (a custom op), is left as it
   is: the placement then reports why its op stays float.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from qdqkit.core.activations import keep_only
from qdqkit.core.constants import constant_derived_values, new_constant
from qdqkit.core.errors import QdqkitError
from qdqkit.core.numerics import make_session
from qdqkit.core.qdq import WEIGHTED_OPS

_STANDARD = frozenset({"", "ai.onnx"})


class FoldComputedWeights(ir.passes.InPlacePass):
    """Evaluate constant-computed weighted-op inputs (see the module docstring for the rules)."""

    def __init__(self) -> None:
        super().__init__()
        self.folded: list[str] = []

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        computed = _computed_inputs(graph)
        if not computed:
            return ir.passes.PassResult(model, modified=False)
        arrays = _evaluate(model, [v.name or "" for v in computed])
        if arrays is None:
            return ir.passes.PassResult(model, modified=False)
        producers = []
        for value, array in zip(computed, arrays, strict=True):
            name = value.name or ""
            producers.append(value.producer())
            value.name = f"{name}__computed"
            stored = new_constant(name, np.asarray(array))
            graph.register_initializer(stored)
            value.replace_all_uses_with(stored)
            self.folded.append(name)
        _remove_dead(graph, [p for p in producers if p is not None])
        return ir.passes.PassResult(model, modified=True)


def _computed_inputs(graph: ir.Graph) -> list[ir.Value]:
    """Weighted-op inputs and BatchNormalization parameters computed from constants only by
    standard-domain nodes (rule 1)."""
    constant = constant_derived_values(graph)
    found: dict[ir.Value, None] = {}
    for node in graph:
        if node.domain not in _STANDARD:
            continue
        if node.op_type in WEIGHTED_OPS:
            values = node.inputs
        elif node.op_type == "BatchNormalization":
            values = node.inputs[1:5]
        else:
            continue
        for value in values:
            if value is None or value.const_value is not None or value not in constant:
                continue
            if value.is_graph_output() or not value.name or not _standard_only(value):
                continue
            found[value] = None
    return list(found)


def _standard_only(value: ir.Value) -> bool:
    """Every node computing ``value`` is of a standard domain (onnxruntime can run it)."""
    stack, seen = [value.producer()], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if node.domain not in _STANDARD:
            return False
        stack.extend(v.producer() for v in node.inputs if v is not None)
    return True


def _evaluate(model: ir.Model, names: list[str]) -> list[np.ndarray] | None:
    """The values named ``names``, computed by onnxruntime on a copy reduced to what they need."""
    copy = model.clone()
    by_name = {out.name: out for node in copy.graph for out in node.outputs if out.name}
    keep_only(copy.graph, [by_name[name] for name in names], drop_unread_inputs=True)
    copy.graph.inputs.clear()  # constants only: nothing to feed
    copy.ir_version = max(copy.ir_version or 0, 4)  # IR 3 would want initializers as inputs
    try:
        session = make_session(copy)
        return list(session.run(names, {}))
    except QdqkitError:
        return None  # rule 3: left as it is
    except Exception:  # onnxruntime raises its own exception classes at run time
        return None


def _remove_dead(graph: ir.Graph, nodes: list[ir.Node]) -> None:
    """Remove ``nodes`` and then their producers while nothing reads their outputs (rule 2)."""
    dead: list[ir.Node] = []
    gone: set[ir.Node] = set()
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if node in gone or node.graph is not graph:
            continue
        if any(out.is_graph_output() or any(u.node not in gone for u in out.uses())
               for out in node.outputs):
            continue
        gone.add(node)
        dead.append(node)
        stack.extend(p for v in node.inputs if v is not None and (p := v.producer()) is not None)
    graph.remove(dead, safe=True)
