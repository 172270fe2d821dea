"""FoldBatchNormIntoQuantizedConv: a BatchNormalization after a conv with a quantized weight.

Rules:
1. ``DQ(W) -> Conv -> BatchNormalization`` (the Conv output read by the BN only, the weight by this
   Conv only, the BN parameters constant) becomes ``DQ(W') -> Conv`` with ``W`` dequantized, BN
   folded into it and its bias (``FoldBatchNormIntoConv``), and ``W'`` quantized again per output
   channel: the weight Q/DQ recomputed for the folded weight.
2. A BN that does not fold is left as it was, weight Q/DQ included.
"""

from __future__ import annotations

import onnx_ir as ir

from qdqkit.core.constants import constant_array, new_constant
from qdqkit.core.qdq import node_label
from qdqkit.passes.fold_batchnorm import FoldBatchNormIntoConv
from qdqkit.passes.replace_qdq import (
    dequantized_constant,
    dq_of_constant,
    remove_unused,
    requantize_weights,
)


class FoldBatchNormIntoQuantizedConv(ir.passes.InPlacePass):
    def __init__(self) -> None:
        super().__init__()
        self.changes: list[str] = []

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        folder = FoldBatchNormIntoConv()
        requantize: list[ir.Node] = []
        for bn in list(graph):
            if bn.op_type != "BatchNormalization" or bn.domain not in ("", "ai.onnx"):
                continue
            x = bn.inputs[0]
            conv = x.producer() if x is not None else None
            if conv is None or x is None or conv.op_type != "Conv" or len(x.uses()) != 1:
                continue
            weight = conv.inputs[1]
            dq = dq_of_constant(weight)
            if weight is None or dq is None or len(weight.uses()) != 1:
                continue
            if any(constant_array(v) is None for v in bn.inputs[1:5] if v is not None):
                continue
            if len(conv.inputs) > 2 and conv.inputs[2] is not None and (
                    constant_array(conv.inputs[2]) is None):
                continue  # a quantized bias: DequantizeBias runs first
            array = dequantized_constant(dq)
            if array is None:
                continue
            floating = new_constant(f"{weight.name}_bn_folded", array)
            graph.register_initializer(floating)
            conv.replace_input_with(1, floating)
            remove_unused(graph, dq)
            label = node_label(bn)
            folder._try_fold(graph, bn)
            if bn.graph is not None:  # did not fold: the float weight is quantized again anyway
                requantize.append(conv)
                continue
            requantize.append(conv)
            self.changes.append(f"BatchNormalization '{label}' folded into '{node_label(conv)}', "
                                "its weight quantized again per output channel")
        if requantize:
            requantize_weights(model, requantize)
        return ir.passes.PassResult(model, modified=bool(self.changes))
