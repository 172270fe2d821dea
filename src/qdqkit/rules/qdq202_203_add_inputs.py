"""QDQ202, QDQ203: the two computed inputs of an Add (C3, C5, C6, B4).

1. QDQ202: an Add that does not fuse into a conv, whose input from a conv chain goes through Q/DQ:
   the conv writes INT8 and the Add runs as its own layer. A Q/DQ the Add shares with other
   readers of the conv output is not reported: that output is needed apart anyway (B7); nor is
   one behind a chain that ends in an activation, which keeps the Add apart with or without it
   (C6).
2. QDQ203: both inputs come through DQ with different per-tensor scales.
One check: both look at the same DQs in front of each Add.
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
    Rule(
        code="QDQ203",
        name="add-scale-mismatch",
        severity=Severity.WARNING,
        summary="an Add whose two quantized inputs have different scales",
        why=(
            "When the Add runs as an INT8 pointwise layer (both inputs quantized), different "
            "input scales force a rescale; NVIDIA's YOLO QAT samples bind both inputs to one "
            "quantizer."
        ),
        what_to_do=(
            "Give both inputs one scale (share the quantizer), or quantize only the residual "
            "input."
        ),
        fixable=True,
        rule_id="C6, B4",
        how_it_checks=(
            "An Add whose both computed inputs come through DQ with different per-tensor scales."
        ),
    ),
)


fix: Fix | None = replace_by_placement


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.qdq import node_label
    from qdqkit.trt.predict.fusion import chain_root

    facts = ctx.prediction.facts
    owners = facts.residual_owners
    for node in ctx.nodes_of("Add"):
        if node in facts.folded_nodes:
            continue
        data = facts.data_inputs(node)
        if len(data) != 2:
            continue
        dqs = [ctx.dq_of(v) for v in data]
        if node not in owners:
            for value, dq in zip(data, dqs, strict=True):
                q = ctx.view.quantize_of(dq) if dq is not None else None
                if q is None or _shared(value) or _shared(q.outputs[0]):
                    continue  # one Q/DQ shared by several readers: no fusion was possible (B7)
                source = q.inputs[0]
                root = chain_root(facts, source, through_qdq=True) if source is not None else None
                if q is None or dq is None or root is None or source is None or root[1]:
                    continue  # a chain ending in an activation keeps the Add apart anyway (C6)
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
        scales = [ctx.scale(dq) if dq is not None else None for dq in dqs]
        if all(dq is not None for dq in dqs) and None not in scales and scales[0] != scales[1]:
            yield ctx.finding(
                "QDQ203", f"Add '{node_label(node)}': input scales {scales[0]:.6g} and "
                f"{scales[1]:.6g}", nodes=[node_label(node), *(node_label(d) for d in dqs if d)],
                tensors=[v.name or "" for v in data],
                cost="a rescale inside the INT8 Add, or no INT8 Add at all",
            )


def _shared(value: ir.Value) -> bool:
    return len(list(value.uses())) > 1 or value.is_graph_output()
