"""QuantizeBeforeInputCast: a network input is quantized before the Cast that converts it.

A float32 network input cast to float16 (or bfloat16) and then quantized, as ModelOpt's AutoCast
exports write it, costs a Cast layer and then a standalone Q Reformat: TensorRT fuses a Q into
nothing that writes float (D6, E1), and a Cast does not commute with Q/DQ. The network input's
own Q is the one Reformat that cannot be avoided (B8). Q moves as early as it can (B1) and a Q of
the input equals a Q of its float16 copy up to that copy's rounding, so, as ModelOpt folds the
Casts around its Q/DQ (A2):
1. Each Q reading the Cast's output reads the float32 input instead, with its scale as float32
   (exact: every float16 value is a float32 value); its DQs keep their scale, whose type is the
   Cast's, so they still write what the readers read. The Cast goes.
2. Only when every reader of the Cast's output is such a Q (input 0), the output is not a network
   output, the Cast is float32 -> float16/bfloat16/float32 and every DQ's scale has its type.
   A chain of float Casts, each read by the next alone (a float16 remainder's Cast of the input
   in front of the model's own), goes the same way.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from qdqkit.core.constants import constant_array
from qdqkit.core.qdq import is_dequantize, is_quantize, node_label

_TARGETS = frozenset({ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.FLOAT})


def quantize_before_input_cast(graph: ir.Graph, q: ir.Node) -> str | None:
    """Rules 1-2 for the Cast ``q`` reads, if any; what changed, or None."""
    x = q.inputs[0]
    cast = x.producer() if x is not None else None
    if x is None or cast is None or not _float_cast(cast):
        return None
    chain = [cast]  # Casts between the input and the Q, last first (a float16 remainder's too)
    while (inner := chain[-1].inputs[0]) is not None and not inner.is_graph_input():
        before = inner.producer()
        if before is None or not _float_cast(before) or len(list(inner.uses())) != 1 \
                or inner.is_graph_output():
            return None
        chain.append(before)
    source = chain[-1].inputs[0]
    to = cast.attributes.get("to")
    if source is None or not source.is_graph_input() or source.dtype != ir.DataType.FLOAT \
            or to is None or x.is_graph_output():
        return None
    target = ir.DataType(to.as_int())
    uses = list(x.uses())
    if any(not is_quantize(u.node) or u.idx != 0 for u in uses):
        return None
    quantizers = list(dict.fromkeys(u.node for u in uses))
    scales: list[np.ndarray] = []
    for node in quantizers:
        scale = constant_array(node.inputs[1]) if len(node.inputs) > 1 else None
        dqs = [u.node for u in node.outputs[0].uses()]
        if scale is None or not dqs or any(not _writes(dq, target) for dq in dqs):
            return None
        scales.append(scale)
    for node, scale in zip(quantizers, scales, strict=True):
        old = node.inputs[1]
        assert old is not None
        single = ir.Value(name=f"{old.name}_float", const_value=ir.Tensor(
            scale.astype(np.float32), name=f"{old.name}_float"))
        graph.register_initializer(single)
        node.replace_input_with(0, source)
        node.replace_input_with(1, single)
    for node in chain:
        graph.remove(node, safe=True)
    labels = ", ".join(f"'{node_label(n)}'" for n in quantizers)
    return (f"{labels} quantize network input '{source.name}' before Cast '{node_label(cast)}', "
            "which goes (B8, A2)")


def _float_cast(node: ir.Node) -> bool:
    to = node.attributes.get("to")
    return (node.op_type == "Cast" and node.domain in ("", "ai.onnx") and to is not None
            and ir.DataType(to.as_int()) in _TARGETS)


def _writes(dq: ir.Node, dtype: ir.DataType) -> bool:
    """Whether DQ ``dq`` writes ``dtype``: its scale's type (float32 without a scale type)."""
    if not is_dequantize(dq) or len(dq.inputs) < 2 or dq.inputs[1] is None:
        return False
    scale = dq.inputs[1]
    own = scale.dtype or (scale.const_value.dtype if scale.const_value is not None else None)
    return own == dtype


class QuantizeBeforeInputCast(ir.passes.InPlacePass):
    """Rules 1-2 over every Q of the model; ``changes`` says what moved."""

    def __init__(self) -> None:
        super().__init__()
        self.changes: list[str] = []

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        for node in [n for n in graph if is_quantize(n)]:
            if node.graph is graph:
                change = quantize_before_input_cast(graph, node)
                if change is not None:
                    self.changes.append(change)
        return ir.passes.PassResult(model, modified=bool(self.changes))
