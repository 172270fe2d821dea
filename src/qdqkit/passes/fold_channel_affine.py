"""FoldChannelAffineIntoConv: fold a constant per-channel scale and shift into the Conv before them.

Exporters write a BatchNormalization already reduced to its affine form as ``Conv -> Mul(a) ->
Add(b)`` (Paddle's re-parameterized blocks), or a bias as ``Conv -> Add(b)``. TensorRT's parser
turns either into a Scale layer that it fuses into the conv, as it does a BatchNormalization.

Rules:
1. ``Conv(x, W[, B]) -> Mul(a)``, ``-> Add(b)`` or ``-> Mul(a) -> Add(b)`` folds when W (and B), a
   and b are constants, a and b hold one value per output channel or one for all (they broadcast
   over the Conv output along its channel axis only), and each tensor of the chain but the last
   is read by the next node only. With per-channel a and b: ``W' = W * a`` and
   ``B' = B * a + b`` (float64, stored in W's type).
2. The Conv output takes over the last folded node's output (its name and its readers), as a
   BatchNormalization fold does, and initializers only the folded nodes read go with them; a
   chain that does not fold is left as it was.
3. Only float weights fold (an integer or quantized weight is some other pass's business), and only
   a Conv whose weight is read by it alone, so no other reader sees the scaled weight.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from qdqkit.core.constants import constant_array, tensor_array
from qdqkit.passes.fold_batchnorm import store_folded

_FLOAT_WEIGHTS = (np.float32, np.float64, np.float16)


class FoldChannelAffineIntoConv(ir.passes.InPlacePass):
    def __init__(self) -> None:
        super().__init__()
        self.folded: list[str] = []

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        folded: list[ir.Node] = []  # removed in one Graph.remove call, not one per node
        for conv in list(graph):
            if conv.op_type == "Conv" and conv.domain in ("", "ai.onnx"):
                folded += self._try_fold(graph, conv)
        constants = {v for node in folded for v in node.inputs if v is not None}
        graph.remove(folded, safe=True)
        for value in constants:  # the scales and shifts now live in the weights
            if value.is_initializer() and not value.uses() and not value.is_graph_output() \
                    and not value.is_graph_input() and value.name in graph.initializers:
                del graph.initializers[value.name or ""]
        return ir.passes.PassResult(model, modified=bool(folded))

    def _try_fold(self, graph: ir.Graph, conv: ir.Node) -> list[ir.Node]:
        """Fold the chain after ``conv`` if it can (rule 1); the nodes folded away."""
        weight_value = conv.inputs[1] if len(conv.inputs) > 1 else None
        weight = weight_value.const_value if weight_value is not None else None
        if weight is None or weight_value is None or weight_value.is_graph_input() \
                or len(weight_value.uses()) != 1:
            return []
        w = tensor_array(weight)
        if w.dtype.type not in _FLOAT_WEIGHTS or w.ndim < 3:
            return []
        channels, rank = w.shape[0], w.ndim  # the Conv output has the weight's rank
        bias_value = conv.inputs[2] if len(conv.inputs) > 2 else None
        bias = constant_array(bias_value) if bias_value is not None else None
        if bias_value is not None and bias is None:
            return []
        scale = np.ones(channels)
        shift = np.zeros(channels)
        chain: list[ir.Node] = []
        y = conv.outputs[0]
        for op_type in ("Mul", "Add"):
            reader = _only_reader(y)
            if reader is None or reader.op_type != op_type or reader.domain not in ("", "ai.onnx"):
                continue
            values = per_channel_constant(reader, y, channels, rank)
            if values is None:
                break
            if op_type == "Mul":
                scale = scale * values
                shift = shift * values
            else:
                shift = shift + values
            chain.append(reader)
            y = reader.outputs[0]
        if not chain:
            return []
        old_b = np.zeros(channels) if bias is None else np.asarray(bias, np.float64).reshape(-1)
        if old_b.size not in (1, channels):
            return []
        new_w = (w.astype(np.float64) * scale.reshape(-1, *([1] * (rank - 1)))).astype(w.dtype)
        new_b = (old_b * scale + shift).astype(w.dtype)
        del w
        store_folded(graph, conv, new_w, new_b)
        x = conv.outputs[0]
        name = y.name
        y.replace_all_uses_with(x, replace_graph_outputs=True)
        x.name = name
        self.folded += [node.name or "" for node in chain]
        return chain


def _only_reader(value: ir.Value) -> ir.Node | None:
    uses = value.uses()
    if len(uses) != 1 or value.is_graph_output():
        return None
    return next(iter(uses)).node


def per_channel_constant(node: ir.Node, value: ir.Value, channels: int, rank: int
                         ) -> np.ndarray | None:
    """The other input of binary ``node`` as ``channels`` float64 values, when it is a constant
    that broadcasts over a rank-``rank`` conv output along the channel axis only."""
    if len(node.inputs) != 2:
        return None
    other = node.inputs[1] if node.inputs[0] is value else node.inputs[0]
    if other is value:
        return None
    array = constant_array(other)
    if array is None or array.dtype.kind != "f" or array.ndim > rank:
        return None
    shape = (1,) * (rank - array.ndim) + array.shape
    if any(size != 1 for axis, size in enumerate(shape) if axis != 1):
        return None
    if shape[1] not in (1, channels):
        return None
    return np.broadcast_to(np.asarray(array, np.float64).reshape(-1), (channels,)).copy()
