"""KeepNodesFloat: take chosen nodes out of INT8 (a fallback list, e.g. ``compare --fallback``).

Rules:
1. A listed node (by name, glob or op type, or the label reports give an unnamed node) reads every
   quantized input in float: an activation through Q/DQ reads the tensor under the chain, a
   quantized constant weight reads a float initializer holding its dequantized values.
2. Only that node's reads change: a Q/DQ other nodes still read stays for them, and a Q or DQ is
   removed once nothing reads it any more.
3. TensorRT then runs the node in float (FP16, or the model's type when strongly typed).
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx_ir as ir

from qdqkit.core.constants import new_constant
from qdqkit.core.qdq import is_dequantize, is_quantize, node_label
from qdqkit.passes.replace_qdq import (
    dequantized_constant,
    dq_of_constant,
    float_root,
    remove_unused,
)
from qdqkit.trt.placement.policy import matches


class KeepNodesFloat(ir.passes.InPlacePass):
    def __init__(self, patterns: Sequence[str]) -> None:
        super().__init__()
        self.patterns = list(patterns)
        self.kept: list[ir.Node] = []
        self.changes: list[str] = []

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        for node in list(graph):
            if is_quantize(node) or is_dequantize(node) or matches(node, self.patterns) is None:
                continue
            self.kept.append(node)
            for index, value in enumerate(node.inputs):
                producer = value.producer() if value is not None else None
                if value is None or producer is None or not is_dequantize(producer):
                    continue
                weight = dq_of_constant(value)
                if weight is not None:
                    array = dequantized_constant(weight)
                    if array is None:
                        continue
                    floating = new_constant(f"{value.name}_float" if value.name else None, array)
                    graph.register_initializer(floating)
                    node.replace_input_with(index, floating)
                    remove_unused(graph, weight)
                    what = "weight"
                else:
                    root = float_root(value)
                    if root is None or root is value:
                        continue
                    node.replace_input_with(index, root)
                    remove_unused(graph, producer)
                    what = "input"
                self.changes.append(f"'{node_label(node)}' reads its {what} '{value.name}' in "
                                    "float (kept out of INT8)")
        return ir.passes.PassResult(model, modified=bool(self.changes))
