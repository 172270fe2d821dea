"""FoldBatchNormIntoConv: fold an inference BatchNormalization into the Conv that feeds it.

Rules:
1. ``Conv(x, W[, B]) -> BatchNormalization`` folds when W (and B) and all four BN parameters are
   constants and the Conv output feeds only the BN: with ``a = gamma / sqrt(var + eps)`` per output
   channel, ``W' = W * a`` and ``B' = (B - mean) * a + beta`` (computed in float64, stored in W's type).
2. The Conv output takes over the BN output (its name, its consumers, its scale); a BN that does not
   fold is left exactly as it was, names included.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from qdqkit.core.constants import constant_array, float_tensor, tensor_array
from qdqkit.core.lazy_proto import release_mapped
from qdqkit.passes.scales import ScaleTable


class FoldBatchNormIntoConv(ir.passes.InPlacePass):
    def __init__(self, scales: ScaleTable | None = None) -> None:
        super().__init__()
        self.scales = scales
        self.folded: list[str] = []

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        folded: list[ir.Node] = []  # removed in one Graph.remove call, not one per node
        for bn in list(graph):
            if bn.op_type == "BatchNormalization" and bn.domain in ("", "ai.onnx"):
                self._try_fold(graph, bn, folded)
        graph.remove(folded, safe=True)
        return ir.passes.PassResult(model, modified=bool(self.folded))

    def _try_fold(
        self, graph: ir.Graph, bn: ir.Node, folded: list[ir.Node] | None = None
    ) -> None:
        """Fold ``bn`` if it can; the folded BN is removed now, or joins ``folded`` when given."""
        x = bn.inputs[0]
        conv = x.producer() if x is not None else None
        if conv is None or x is None or conv.op_type != "Conv" or len(bn.inputs) < 5:
            return
        if len(bn.outputs) > 1 and any(o.uses() or o.is_graph_output() for o in bn.outputs[1:]):
            return  # training-mode BN
        if len(x.uses()) != 1 or x.is_graph_output():
            return
        if self.scales is not None and x in self.scales:
            return  # the Conv output has its own INT8 scale; keep both tensors
        weight_value = conv.inputs[1]
        weight = weight_value.const_value if weight_value is not None else None
        if weight is None or weight_value is None or len(weight_value.uses()) != 1:
            return
        if weight_value.is_graph_input():
            return  # an IR-3 style weight that callers may override: not a constant
        params = [constant_array(v) for v in bn.inputs[1:5]]
        bias_value = conv.inputs[2] if len(conv.inputs) > 2 else None
        bias = constant_array(bias_value) if bias_value is not None else None
        if any(p is None for p in params) or (bias_value is not None and bias is None):
            return
        gamma, beta, mean, var = (np.asarray(p, dtype=np.float64).reshape(-1) for p in params)
        eps = bn.attributes["epsilon"].as_float() if "epsilon" in bn.attributes else 1e-5
        w = tensor_array(weight)
        channels = w.shape[0]
        if any(p.size not in (1, channels) for p in (gamma, beta, mean, var)):
            return
        factor = gamma / np.sqrt(var + eps)
        new_w = (w.astype(np.float64) * factor.reshape(-1, *([1] * (w.ndim - 1)))).astype(w.dtype)
        old_b = (
            np.zeros(channels) if bias is None else np.asarray(bias, dtype=np.float64).reshape(-1)
        )
        new_b = ((old_b - mean) * factor + beta).astype(w.dtype)
        del w
        store_folded(graph, conv, new_w, new_b)
        y = bn.outputs[0]
        name = y.name
        if self.scales is not None:
            self.scales.move(y, x)
        y.replace_all_uses_with(x, replace_graph_outputs=True)
        if folded is None:
            graph.remove(bn, safe=True)
        else:
            folded.append(bn)
        x.name = name
        self.folded.append(bn.name or name or "")


def store_folded(graph: ir.Graph, conv: ir.Node, weight: np.ndarray, bias: np.ndarray) -> None:
    """Give ``conv`` a fold's weight and bias. The weight is replaced in place (a fold checks first
    that only this Conv reads it); so is the bias when it is an initializer only this Conv reads,
    else the Conv gets a new one, ``<conv>.folded_bias``."""
    weight_value = conv.inputs[1]
    assert weight_value is not None
    release_mapped(weight_value)
    weight_value.const_value = float_tensor(weight, name=weight_value.name)
    bias_value = conv.inputs[2] if len(conv.inputs) > 2 else None
    if (
        bias_value is not None and bias_value.is_initializer()
        and not bias_value.is_graph_input() and len(bias_value.uses()) == 1
    ):
        bias_value.const_value = float_tensor(bias, name=bias_value.name)
        return
    base = conv.name or (conv.outputs[0].name or "conv")
    b_value = ir.Value(name=f"{base}.folded_bias", const_value=float_tensor(bias))
    graph.register_initializer(b_value)
    if len(conv.inputs) < 3:
        conv.resize_inputs(3)
    conv.replace_input_with(2, b_value)
