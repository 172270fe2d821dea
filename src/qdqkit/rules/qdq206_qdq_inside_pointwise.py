"""QDQ206: a Q/DQ pair inside what TensorRT fuses into one PointWise layer (C8).

Adjacent pointwise ops fuse into one PointWise kernel, a DAG included: in ``x * Clip(x + 3, 0, 6)
/ 6`` (a decomposed HardSwish) the Mul reads the Clip's result and the layer's own input x. A
Q -> DQ pair on a tensor between two such ops cuts the kernel in two: one more layer, one more
round trip through memory, and one more rounding to INT8 that the fused kernel never does. The
check: an INT8 pointwise layer's output is read only through Q -> DQ, by one pointwise op whose
other inputs are constants or tensors the layer already reads (through Q/DQ or not). Around a
layer that runs float the pair is a Reformat for nothing, which QDQ407 reports. GPU only: DLA
builds the translated model implicitly, where a pair is the tensor's range, which the translation
needs and which cuts no fusion (I1).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from qdqkit.rules.types import Finding, Fix, Rule, Severity, replace_by_placement

if TYPE_CHECKING:
    import onnx_ir as ir

    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ206",
        name="qdq-inside-pointwise",
        severity=Severity.WARNING,
        summary="Q/DQ between two pointwise ops that TensorRT fuses into one PointWise layer",
        why=(
            "Adjacent pointwise ops (a decomposed HardSwish, x * Sigmoid(x)) run as one fused "
            "kernel; a Q/DQ between them splits it into two layers and rounds the intermediate "
            "to INT8."
        ),
        what_to_do=(
            "Remove the Q/DQ inside the pointwise chain; keep the ones on its inputs and after "
            "its last op."
        ),
        fixable=True,
        rule_id="C8",
        how_it_checks=(
            "An INT8 pointwise layer's output is read only through Q/DQ, by one pointwise op "
            "whose other inputs are constants or tensors the layer already reads (GPU targets: "
            "on DLA a pair is a range and cuts no fusion)."
        ),
    ),
)


# DLA builds implicitly: a pair there is a range the translation needs, and cuts no fusion (I1).
TARGETS = ("gpu",)

fix: Fix | None = replace_by_placement


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.qdq import is_quantize, node_label
    from qdqkit.trt.predict.ops import POINTWISE, is_default_domain

    prediction = ctx.prediction
    for found in ctx.predicted_blocks(weighted=False):  # a conv's epilogue: QDQ103/104/105
        if not found.int8_compute:
            continue  # a float layer's Q/DQ is a Reformat for nothing: QDQ407
        block = found.block
        last = block.last
        if last.op_type not in POINTWISE or not is_default_domain(last) or not last.outputs:
            continue
        value = last.outputs[0]
        uses = list(value.uses())
        if not uses or value.is_graph_output() or not all(
                is_quantize(u.node) and u.idx == 0 for u in uses):
            continue
        readers = _readers_through_qdq(uses)
        if len(readers) != 1:
            continue
        first, pairs = next(iter(readers.items()))
        # Past the no-op copies an exporter leaves (paddle2onnx's Identity after each op).
        reader, read = ctx.past_copies(first, first.inputs[0]) if first.inputs and \
            first.inputs[0] is not None else (first, value)
        if (reader.op_type not in POINTWISE or not is_default_domain(reader)
                or prediction.block_of(reader) is block):
            continue
        inside = {*block.nodes}
        known = {value, read} | {ctx.unwrap_qdq(v)[0] for n in inside for v in n.inputs
                                 if v is not None and v.producer() not in inside}
        if all(v is None or prediction.facts.is_constant(v) or ctx.unwrap_qdq(v)[0] in known
               for v in reader.inputs):
            names = [node_label(n) for n in pairs]
            yield ctx.finding(
                "QDQ206", f"Q/DQ on '{value.name}' between '{node_label(last)}' and "
                f"'{node_label(reader)}', which TensorRT fuses into one PointWise layer",
                nodes=[*names, node_label(last), node_label(reader)], tensors=[value.name or ""],
                cost="+1 PointWise layer and an INT8 rounding inside the fused computation",
            )


def _readers_through_qdq(uses: list[Any]) -> dict[ir.Node, list[ir.Node]]:
    """The final readers behind the Q nodes in ``uses``, each with the Q/DQ nodes on its way."""
    from qdqkit.core.qdq import is_dequantize

    readers: dict[ir.Node, list[ir.Node]] = {}
    for use in uses:
        q = use.node
        for dq_use in q.outputs[0].uses():
            dq = dq_use.node
            if not is_dequantize(dq):
                return {}
            for reader in dq.outputs[0].uses():
                readers.setdefault(reader.node, []).extend([q, dq])
    return readers
