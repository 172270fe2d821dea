"""FoldWeightReshapeTranspose: compute constant Reshape/Transpose chains on weights ahead of time.

Rules:
1. A Reshape, Transpose, Squeeze, Unsqueeze, Identity or Cast whose inputs are all constants (as TF
   exports put on depthwise and transposed-conv weights after their DQ) is replaced by one float
   initializer holding its result.
2. Chains fold one node at a time in graph order, so ``W -> Reshape -> Transpose -> Conv`` ends as
   ``W' -> Conv``; a node whose output is a graph output is left alone.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from qdqkit.core.constants import constant_array

FOLDABLE_OPS = frozenset({"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Identity", "Cast"})


def _attr_ints(node: ir.Node, name: str) -> list[int] | None:
    attr = node.attributes.get(name)
    return list(attr.as_ints()) if attr is not None else None


def evaluate(node: ir.Node, inputs: list[np.ndarray | None]) -> np.ndarray | None:
    """The ONNX result of one foldable op on numpy inputs, or None if not computable here."""
    data = inputs[0]
    if data is None:
        return None
    op = node.op_type
    if op == "Identity":
        return data
    if op == "Cast":
        return data.astype(ir.DataType(node.attributes["to"].as_int()).numpy())
    if op == "Transpose":
        perm = _attr_ints(node, "perm")
        return np.transpose(data, perm) if perm is not None else np.transpose(data)
    if op == "Reshape":
        if len(inputs) < 2 or inputs[1] is None:
            return None
        shape = [int(d) for d in inputs[1].reshape(-1)]
        allow_zero = node.attributes.get("allowzero")
        if not (allow_zero is not None and allow_zero.as_int()):
            shape = [data.shape[i] if d == 0 else d for i, d in enumerate(shape)]
        return data.reshape(shape)
    axes = _attr_ints(node, "axes")
    if axes is None and len(inputs) > 1 and inputs[1] is not None:
        axes = [int(a) for a in inputs[1].reshape(-1)]
    if op == "Squeeze":
        return np.squeeze(data, axis=tuple(axes)) if axes else np.squeeze(data)
    if op == "Unsqueeze" and axes is not None:
        rank = data.ndim + len(axes)
        return np.expand_dims(data, tuple(sorted(a % rank for a in axes)))
    return None


class FoldWeightReshapeTranspose(ir.passes.InPlacePass):
    def __init__(self) -> None:
        super().__init__()
        self.folded = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        for node in list(graph):
            if node.op_type not in FOLDABLE_OPS or node.domain not in ("", "ai.onnx"):
                continue
            out = node.outputs[0]
            if out.is_graph_output() or not node.inputs or node.inputs[0] is None:
                continue
            if node.inputs[0].const_value is None:  # only start from initializers
                continue
            values = [constant_array(v) if v is not None else None for v in node.inputs]
            if any(v is None for v, i in zip(values, node.inputs, strict=False) if i is not None):
                continue
            result = evaluate(node, values)
            if result is None:
                continue
            folded = ir.Value(name=None, const_value=ir.Tensor(np.asarray(result, order="C")))
            name = out.name
            out.replace_all_uses_with(folded)
            graph.remove(node, safe=True)
            folded.name = name
            graph.register_initializer(folded)
            self.folded += 1
        return ir.passes.PassResult(model, modified=self.folded > 0)


def evaluate_constant(value: ir.Value | None, depth: int = 8) -> np.ndarray | None:
    """The numpy value of ``value`` through foldable ops on constants, or None."""
    direct = constant_array(value)
    if direct is not None or value is None or depth == 0:
        return direct
    node = value.producer()
    if node is None or node.op_type not in FOLDABLE_OPS:
        return None
    inputs = [evaluate_constant(v, depth - 1) if v is not None else None for v in node.inputs]
    return evaluate(node, inputs)
