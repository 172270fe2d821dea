"""QDQ203: an Add whose two quantized inputs have different scales (C6, B4).

Both computed inputs of an Add come through DQ with different per-tensor scales: when the Add
runs as an INT8 pointwise layer, one input is rescaled to the other's scale first.
GPU only: on DLA every tensor keeps its own range in the implicit build (TensorRT's own DLA
calibrator gives each Add input one), and DLA's ElementWise layer scales each input itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity, replace_by_placement

if TYPE_CHECKING:
    from qdqkit.rules.model_context import LintContext

RULES = (
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

TARGETS = ("gpu",)

fix: Fix | None = replace_by_placement


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.qdq import node_label
    from qdqkit.trt.predict.ops import is_add

    facts = ctx.prediction.facts
    for node in ctx.nodes_of("Add", "Sum"):
        if not is_add(node) or node in facts.folded_nodes:
            continue
        data = facts.data_inputs(node)
        if len(data) != 2:
            continue
        dqs = [ctx.dq_of(v) for v in data]
        scales = [ctx.scale(dq) if dq is not None else None for dq in dqs]
        if all(dq is not None for dq in dqs) and None not in scales and scales[0] != scales[1]:
            yield ctx.finding(
                "QDQ203", f"Add '{node_label(node)}': input scales {scales[0]:.6g} and "
                f"{scales[1]:.6g}", nodes=[node_label(node), *(node_label(d) for d in dqs if d)],
                tensors=[v.name or "" for v in data],
                cost="a rescale inside the INT8 Add, or no INT8 Add at all",
            )
