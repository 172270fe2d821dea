"""FoldDequantizedWeightPath: a quantized weight's Transpose/Reshape/Identity path folded into it.

Rules:
1. ``W -> DQ -> (Transpose | Reshape | Identity | Squeeze | Unsqueeze | Cast)+ -> weighted op``
   (TensorFlow QAT's HWIO -> OIHW Transposes, sampleQAT's post-processing, any exporter's
   Identity) becomes ``W' -> DQ -> weighted op``: the dequantized weight is run through the path
   once, stored as a float initializer and quantized again per output channel (``InsertQdq``).
2. Only paths whose tensors nothing else reads are folded; the old DQ (and Q) go once unread.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from qdqkit.core.constants import constant_array
from qdqkit.core.qdq import WEIGHT_PATH_OPS, WEIGHTED_OPS, node_label
from qdqkit.passes.fold_weight_path import evaluate
from qdqkit.passes.replace_qdq import (
    dequantized_constant,
    dq_of_constant,
    remove_unused,
    requantize_weights,
)


def _path_to_dq(value: ir.Value | None) -> tuple[list[ir.Node], ir.Node] | None:
    """The path ops (from the DQ down) and the DQ of a constant at their start, if any."""
    path: list[ir.Node] = []
    while value is not None and len(path) < 8:
        dq = dq_of_constant(value)
        if dq is not None:
            return (list(reversed(path)), dq) if path else None
        producer = value.producer()
        if producer is None or producer.op_type not in WEIGHT_PATH_OPS or not producer.inputs:
            return None
        if len(value.uses()) != 1 or value.is_graph_output():
            return None
        path.append(producer)
        value = producer.inputs[0]
    return None


class FoldDequantizedWeightPath(ir.passes.InPlacePass):
    def __init__(self) -> None:
        super().__init__()
        self.changes: list[str] = []

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        requantize: list[ir.Node] = []
        for node in list(graph):
            if node.op_type not in WEIGHTED_OPS or node.domain not in ("", "ai.onnx"):
                continue
            for index in range(min(len(node.inputs), 2)):
                found = _path_to_dq(node.inputs[index])
                if found is None:
                    continue
                path, dq = found
                array = dequantized_constant(dq)
                if array is None or dq.outputs[0].uses().__len__() != 1:
                    continue
                for step in path:
                    inputs = [array, *(constant_array(v) if v is not None else None
                                       for v in step.inputs[1:])]
                    array = evaluate(step, inputs)
                    if array is None:
                        break
                if array is None or not np.issubdtype(array.dtype, np.floating):
                    continue
                old = node.inputs[index]
                source = dq.inputs[0]
                base = (source.name if source is not None and source.name else "weight")
                floating = ir.Value(name=f"{base}_folded", const_value=ir.Tensor(
                    np.asarray(array, order="C")))
                graph.register_initializer(floating)
                node.replace_input_with(index, floating)
                for step in reversed(path):
                    if not any(o.uses() for o in step.outputs):
                        graph.remove(step, safe=True)
                remove_unused(graph, dq)
                requantize.append(node)
                ops = " -> ".join(step.op_type for step in path)
                self.changes.append(f"weight of '{node_label(node)}': DQ -> {ops} folded into "
                                    f"the weight{'' if old is None else f' {old.name!r}'}, "
                                    "quantized again per output channel")
        if requantize:
            requantize_weights(model, requantize)
        return ir.passes.PassResult(model, modified=bool(self.changes))
