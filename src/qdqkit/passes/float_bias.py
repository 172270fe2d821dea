"""DequantizeBias: quantized biases back to float.

Rules:
1. The bias input (index 2) of a Conv, ConvTranspose, Gemm or BatchNormalization produced by a
   DequantizeLinear of a constant (onnxruntime's int32 bias, which it writes for a
   BatchNormalization left unfolded too, or a Q/DQ pair on a float bias) reads a float
   initializer holding the dequantized values instead; the DQ (and its Q) go once nothing else
   reads them.
2. TensorRT quantizes nothing but weights and activations: it computes biases in float anyway.
3. An int32 DQ is one TensorRT cannot build at all (A6), so every reader of its output takes the
   float values: a PyTorch export shares one initializer among equal biases through Identity
   nodes, and onnxruntime then dequantizes the conv's bias for all of them.
4. ``nodes`` (node names, as findings give them) limits the rewrite to those layers.
"""

from __future__ import annotations

from collections.abc import Collection

import onnx_ir as ir

from qdqkit.core.constants import new_constant
from qdqkit.core.qdq import node_label
from qdqkit.passes.replace_qdq import dequantized_constant, dq_of_constant, remove_unused

# The ops whose input 2 is a bias (a BatchNormalization's B).
BIASED_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "BatchNormalization"})


class DequantizeBias(ir.passes.InPlacePass):
    def __init__(self, nodes: Collection[str] | None = None) -> None:
        super().__init__()
        self.nodes = None if nodes is None else frozenset(nodes)
        self.changes: list[str] = []

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        for node in list(graph):
            if node.op_type not in BIASED_OPS or len(node.inputs) < 3:
                continue
            if self.nodes is not None and node_label(node) not in self.nodes:
                continue
            bias = node.inputs[2]
            dq = dq_of_constant(bias)
            array = dequantized_constant(dq) if dq is not None else None
            if bias is None or dq is None or array is None:
                continue
            floating = new_constant(f"{bias.name}_float" if bias.name else None, array)
            graph.register_initializer(floating)
            if _int32(dq) and not bias.is_graph_output():
                bias.replace_all_uses_with(floating)  # rule 3
            else:
                node.replace_input_with(2, floating)
            remove_unused(graph, dq)
            self.changes.append(f"bias of '{node_label(node)}' back to float")
        return ir.passes.PassResult(model, modified=bool(self.changes))


def _int32(dq: ir.Node) -> bool:
    source = dq.inputs[0]
    dtype = source.dtype if source is not None else None
    if dtype is None and source is not None and source.const_value is not None:
        dtype = source.const_value.dtype
    return dtype == ir.DataType.INT32
