"""QDQ202: a residual Add's conv-branch input carries Q/DQ (C3, C5, C6).

An Add that does not fuse into a conv, whose input from a conv chain goes through Q/DQ: the conv
writes INT8 and the Add runs as its own layer. A Q/DQ the Add shares with other readers of the
conv output is not reported: that output is needed apart anyway (B7); nor is one behind a chain
that ends in an activation, which keeps the Add apart with or without it (C6); nor, on DLA, one
behind a layer that falls back to the GPU (a MatMul of tokens), which an Add on DLA cannot join.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity, replace_by_placement

if TYPE_CHECKING:
    import onnx_ir as ir

    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ202",
        name="residual-conv-branch-quantized",
        severity=Severity.ERROR,
        summary="a residual Add's conv-branch input carries Q/DQ",
        why=(
            "With Q/DQ on both Add inputs, TensorRT cannot fuse the Add into the conv: the conv "
            "writes INT8, the Add runs as a separate pointwise layer."
        ),
        what_to_do=(
            "Remove the Q/DQ on the conv branch; keep it only on the residual (identity) input."
        ),
        fixable=True,
        rule_id="C3, C5",
        how_it_checks=(
            "An Add with two computed inputs where an input is DQ(Q(x)) and x is the "
            "single-reader output of a conv chain."
        ),
    ),
)


fix: Fix | None = replace_by_placement


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.qdq import node_label
    from qdqkit.trt.dla import dla_layer_kind
    from qdqkit.trt.predict.fusion import chain_root
    from qdqkit.trt.predict.ops import is_add

    facts = ctx.prediction.facts
    owners = facts.residual_owners
    for node in ctx.nodes_of("Add", "Sum"):
        if not is_add(node) or node in facts.folded_nodes or node in owners:
            continue
        data = facts.data_inputs(node)
        if len(data) != 2:
            continue
        for value in data:
            dq = ctx.dq_of(value)
            q = ctx.view.quantize_of(dq) if dq is not None else None
            if dq is None or q is None or _shared(value) or _shared(q.outputs[0]):
                continue  # one Q/DQ shared by several readers: no fusion was possible (B7)
            source = q.inputs[0]
            root = chain_root(facts, source, through_qdq=True) if source is not None else None
            if root is None or source is None or root[1]:
                continue  # a chain ending in an activation keeps the Add apart anyway (C6)
            if ctx.prediction.target == "dla" and not dla_layer_kind(root[0]):
                continue  # its layer falls back to the GPU: the Add on DLA cannot join it (I7)
            layer = ctx.prediction.layer_of(node)
            yield ctx.finding(
                "QDQ202", f"Add '{node_label(node)}': its conv-branch input (from "
                f"'{node_label(root[0])}') goes through '{node_label(q)}'/'{node_label(dq)}'",
                nodes=[node_label(node), node_label(q), node_label(dq)],
                tensors=[source.name or ""],
                cost=f"the Add does not fuse into '{node_label(root[0])}': +1 layer "
                f"'{layer.name if layer else node_label(node)}' "
                f"({layer.precision if layer else 'float'})",
            )

def _shared(value: ir.Value) -> bool:
    return len(list(value.uses())) > 1 or value.is_graph_output()
