"""Checks on residual Adds and non-weighted INT8 ops: QDQ201-QDQ205."""

from __future__ import annotations

from collections.abc import Iterator

from qdqkit.core.qdq import is_dequantize
from qdqkit.linting.context import LintContext, module_label, name_of
from qdqkit.linting.result import Finding
from qdqkit.trt.engine import LayerKind, Precision
from qdqkit.trt.predict.fusion import chain_root, residual_owners
from qdqkit.trt.predict.ops import is_plugin


def check_residual_fusion(ctx: LintContext) -> Iterator[Finding]:
    """QDQ201 (float skip input) and QDQ204 (INT8 skip, float output), from the prediction."""
    walk = ctx.prediction.walk
    for block in ctx.prediction.blocks:
        add, residual = block.residual_add, block.residual_input
        layer = walk.layer_of_block.get(block)
        if add is None or residual is None or layer is None or block.weighted is None:
            continue
        label = module_label(block)
        if not layer.extra.get("int8_compute"):
            continue  # a float conv: the skip input costs nothing more (QDQ101/102 say why)
        if walk.int8_of(residual) is None:
            after = ctx.reformats_reading(layer)
            yield ctx.reformat_finding(
                "QDQ201", f"Add '{name_of(add)}': skip input '{residual.name}' is float",
                add, after, tensors=[residual.name or ""],
                consequence=f"block {label} writes {layer.output_precision}",
            )
        elif layer.output_precision != Precision.INT8:
            dq = ctx.dq_of(residual)
            reformat = walk.qdq_layer.get(dq) if dq is not None else None
            layers = [reformat] if reformat is not None else []
            yield ctx.reformat_finding(
                "QDQ204", f"Add '{name_of(add)}': skip input '{residual.name}' is INT8 but the "
                "block's readers are float", add, layers, tensors=[residual.name or ""],
                consequence=f"block {label} writes {layer.output_precision}",
            )


def check_add_inputs(ctx: LintContext) -> Iterator[Finding]:
    """QDQ202 (an unfused Add whose conv-branch input is quantized) and QDQ203 (two scales)."""
    owners = residual_owners(ctx.prediction.facts)
    facts = ctx.prediction.facts
    for node in ctx.graph:
        if node.op_type != "Add" or node in facts.folded_nodes:
            continue
        data = facts.data_inputs(node)
        if len(data) != 2:
            continue
        dqs = [ctx.dq_of(v) for v in data]
        if node not in owners:
            for dq in dqs:
                q = ctx.view.quantize_of(dq) if dq is not None else None
                source = q.inputs[0] if q is not None else None
                root = chain_root(facts, source, through_qdq=True) if source is not None else None
                if q is None or dq is None or root is None or source is None:
                    continue
                layer = ctx.layer_of(node)
                yield ctx.finding(
                    "QDQ202", f"Add '{name_of(node)}': its conv-branch input (from "
                    f"'{name_of(root[0])}') goes through '{name_of(q)}'/'{name_of(dq)}'",
                    nodes=[name_of(node), name_of(q), name_of(dq)], tensors=[source.name or ""],
                    cost=f"the Add does not fuse into '{name_of(root[0])}': +1 layer "
                    f"'{layer.name if layer else name_of(node)}' "
                    f"({layer.precision if layer else 'float'})",
                )
        scales = [ctx.scale(dq) if dq is not None else None for dq in dqs]
        if all(dq is not None for dq in dqs) and None not in scales and scales[0] != scales[1]:
            yield ctx.finding(
                "QDQ203", f"Add '{name_of(node)}': input scales {scales[0]:.6g} and "
                f"{scales[1]:.6g}", nodes=[name_of(node), *(name_of(d) for d in dqs if d)],
                tensors=[v.name or "" for v in data],
                cost="a rescale inside the INT8 Add, or no INT8 Add at all",
            )


def check_int8_in_float_out(ctx: LintContext) -> Iterator[Finding]:
    """QDQ205: a non-weighted layer predicted float although an input comes through DQ."""
    walk = ctx.prediction.walk
    for block in ctx.prediction.blocks:
        layer = walk.layer_of_block.get(block)
        anchor = block.anchor
        if layer is None or block.weighted is not None or is_plugin(anchor):
            continue
        if layer.precision == Precision.INT8 or layer.kind == LayerKind.CONCATENATION:
            continue
        inputs = walk._external_inputs(block)
        dqs = [
            d for v in inputs
            if walk.int8_of(v) is not None and (d := v.producer()) is not None and is_dequantize(d)
        ]
        if not dqs:
            continue
        reformats = [walk.qdq_layer[d] for d in dqs if d in walk.qdq_layer]
        yield ctx.finding(
            "QDQ205", f"{anchor.op_type} '{name_of(anchor)}' reads INT8 but its output is not "
            "quantized", nodes=[name_of(n) for n in block.nodes] + [name_of(d) for d in dqs],
            cost=ctx.reformat_cost(reformats, f"'{layer.name}' runs {layer.precision}"),
        )
