"""Checks on Concat and pooling: QDQ301-QDQ304."""

from __future__ import annotations

from collections.abc import Iterator

import onnx_ir as ir

from qdqkit.linting.context import LintContext, name_of
from qdqkit.linting.result import Finding
from qdqkit.trt.engine import Precision
from qdqkit.trt.predict.ops import AVERAGING_POOLS


def _q_scales(ctx: LintContext, value: ir.Value) -> set[float | None]:
    return {ctx.scale(q) for q in ctx.activation_quantizers(value)}


def check_concat(ctx: LintContext) -> Iterator[Finding]:
    """QDQ301 (several scales around a Concat) and QDQ302 (INT8 and float inputs mixed)."""
    walk = ctx.prediction.walk
    for node in ctx.graph:
        if node.op_type != "Concat" or node in ctx.prediction.facts.folded_nodes:
            continue
        inputs = [v for v in node.inputs if v is not None and not ctx.is_constant(v)]
        sources = [walk.int8_of(v) for v in inputs]
        quantized = [v for v, s in zip(inputs, sources, strict=False) if s is not None]
        if not quantized:
            continue
        if len(quantized) < len(inputs):
            floats = [v.name or "" for v, s in zip(inputs, sources, strict=False) if s is None]
            dqs = [ctx.dq_of(v) for v in quantized]
            reformats = [walk.qdq_layer[d] for d in dqs if d is not None and d in walk.qdq_layer]
            yield ctx.reformat_finding(
                "QDQ302", f"Concat '{name_of(node)}': {len(quantized)} INT8 and {len(floats)} "
                f"float inputs ({', '.join(floats[:3])})", node, reformats,
                tensors=floats, consequence="the Concat runs float",
            )
            continue
        found = {s[1] for s in sources if s is not None} | _q_scales(ctx, node.outputs[0])
        scales = {s for s in found if s is not None}
        if len(scales) > 1:
            requant = list(walk.requantize_for.get(node, []))
            if not requant:
                dqs = [ctx.dq_of(v) for v in quantized]
                requant = [walk.qdq_layer[d] for d in dqs if d is not None and d in walk.qdq_layer]
            shown = ", ".join(f"{s:.6g}" for s in sorted(scales))
            yield ctx.reformat_finding(
                "QDQ301", f"Concat '{name_of(node)}': {len(scales)} different scales ({shown})",
                node, requant, tensors=[v.name or "" for v in quantized],
            )


def check_maxpool_scales(ctx: LintContext) -> Iterator[Finding]:
    """QDQ303: the Q after a MaxPool vs the Qs on its input (through a DQ(Q(x)) pair)."""
    for node in ctx.graph:
        if node.op_type != "MaxPool" or not node.inputs or node.inputs[0] is None:
            continue
        x = node.inputs[0]
        inside = _q_scales(ctx, x)
        dq = ctx.dq_of(x)
        if dq is not None:
            inside.add(ctx.scale(dq))
            q = ctx.view.quantize_of(dq)
            if q is not None and q.inputs[0] is not None:
                inside |= _q_scales(ctx, q.inputs[0])
        before = {s for s in inside if s is not None}
        after = {s for s in _q_scales(ctx, node.outputs[0]) if s is not None}
        if before and after and len(before | after) > 1:
            shown = ", ".join(f"{s:.6g}" for s in sorted(before | after))
            yield ctx.finding(
                "QDQ303", f"MaxPool '{name_of(node)}': scales before and after differ ({shown})",
                nodes=[name_of(node), *(name_of(q) for q in ctx.activation_quantizers(node.outputs[0]))],
                tensors=[x.name or "", node.outputs[0].name or ""],
                cost="+1 requantize Reformat (the INT8 tensor cannot be shared)",
            )


def check_float_pool(ctx: LintContext) -> Iterator[Finding]:
    """QDQ304: an averaging pool predicted float next to INT8 layers."""
    walk = ctx.prediction.walk
    for block in ctx.prediction.blocks:
        anchor = block.anchor
        layer = walk.layer_of_block.get(block)
        source = anchor.inputs[0] if anchor.inputs else None
        if anchor.op_type not in AVERAGING_POOLS or layer is None or source is None:
            continue
        if layer.precision == Precision.INT8 or walk.int8_of(source) is not None:
            continue
        producer = walk.producer_layer.get(walk.resolve(source))
        int8_before = producer is not None and bool(producer.extra.get("int8_compute"))
        int8_after = walk.wanted.get(anchor.outputs[0]) is not None
        if not (int8_before or int8_after):
            continue
        after = ctx.reformats_reading(layer)
        yield ctx.reformat_finding(
            "QDQ304", f"{anchor.op_type} '{name_of(anchor)}' is not quantized between INT8 layers",
            anchor, after, tensors=[source.name or ""],
            consequence=f"the pool runs {layer.precision}",
        )
