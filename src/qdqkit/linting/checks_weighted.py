"""Checks on weighted ops and their epilogues: QDQ101-QDQ108, QDQ403."""

from __future__ import annotations

import math
from collections.abc import Iterator

import onnx_ir as ir

from qdqkit.core.qdq import is_dequantize, is_quantize
from qdqkit.linting.context import LintContext, module_label, name_of
from qdqkit.linting.result import Finding
from qdqkit.trt.predict.ops import ACTIVATIONS, is_default_domain

_EPILOGUE_OPS = ACTIVATIONS | {"BatchNormalization"}


def _through_qdq(value: ir.Value) -> list[tuple[ir.Node, ir.Node, ir.Node]]:
    """(Q, DQ, reader) for every reader reached from ``value`` through one Q -> DQ pair."""
    found = []
    for use in value.uses():
        q = use.node
        if not is_quantize(q) or use.idx != 0:
            continue
        for dq_use in q.outputs[0].uses():
            dq = dq_use.node
            if is_dequantize(dq):
                found += [(q, dq, reader.node) for reader in dq.outputs[0].uses()]
    return found


def check_weighted_quantization(ctx: LintContext) -> Iterator[Finding]:
    """QDQ101 (half quantized), QDQ102 (not quantized in a quantized model), QDQ403."""
    walk = ctx.prediction.walk
    quantized_model = ctx.view.qdq_count > 0
    for block in ctx.prediction.blocks:
        node, ref = block.weighted, block.weight
        if node is None or ref is None:
            continue
        activation = block.activation_input()
        act_int8 = walk.int8_of(activation) is not None
        layer = walk.layer_of_block.get(block)
        runs = str(layer.precision) if layer is not None else "float"
        where = f"{node.op_type} '{name_of(node)}'"
        if ref.quantized and ref.params is not None and not ref.params.per_channel:
            channels = ref.source.shape[0] if ref.source.shape is not None else None
            if channels is None or channels != 1:
                yield ctx.finding("QDQ403", f"{where}: weight '{ref.source.name}' has one scale",
                                  nodes=[name_of(ref.dequantize)] if ref.dequantize else [],
                                  tensors=[ref.source.name or ""], cost="accuracy, not speed")
        # A DQ that TensorRT cannot use (zero point, per-channel) is reported by QDQ401/QDQ402.
        act_dq = ctx.dq_of(activation) is not None
        if act_int8 != ref.quantized and not (act_dq and not act_int8):
            half = ("the weight is quantized but the activation "
                    f"'{activation.name if activation else '?'}' is float"
                    if ref.quantized else "the activation is quantized but the weight is float")
            before = [
                r for r in ctx.prediction.engine.layers
                if r.origin == "QDQ" and layer is not None and r.outputs
                and any(t.name == r.outputs[0].name for t in layer.inputs)
            ]
            yield ctx.finding(
                "QDQ101", f"{where}: {half}", nodes=[name_of(node)],
                tensors=[activation.name or ""] if activation is not None else [],
                cost=ctx.reformat_cost(before, f"{module_label(block)} runs {runs}"),
            )
        elif not ref.quantized and quantized_model:
            yield ctx.finding("QDQ102", f"{where} is not quantized", nodes=[name_of(node)],
                              cost=f"runs {runs} inside a quantized model")


def check_epilogue_qdq(ctx: LintContext) -> Iterator[Finding]:
    """QDQ103 (Q right after the weighted op), QDQ104 (Q/DQ between BN/bias and activation)."""
    for block in ctx.prediction.blocks:
        if block.weighted is None:
            continue
        value = block.output
        for q, dq, reader in _through_qdq(value):
            if reader.op_type not in _EPILOGUE_OPS or not is_default_domain(reader):
                continue
            code = "QDQ103" if block.last is block.weighted else "QDQ104"
            split = ctx.layer_of(reader)
            cost = "the epilogue runs as a separate layer"
            if split is not None:
                cost = f"+1 layer '{split.name}' ({split.precision})"
            yield ctx.finding(
                code,
                f"'{name_of(q)}'/'{name_of(dq)}' between '{name_of(block.last)}' and "
                f"{reader.op_type} '{name_of(reader)}'",
                nodes=[name_of(q), name_of(dq), name_of(reader)], tensors=[value.name or ""],
                cost=cost,
            )


def _unwrap(ctx: LintContext, value: ir.Value | None) -> tuple[ir.Value | None, list[ir.Node]]:
    """``value`` with one DQ(Q(x)) pair peeled off, and the pair's nodes."""
    dq = ctx.dq_of(value)
    if dq is None:
        return value, []
    q = ctx.view.quantize_of(dq)
    if q is None or q.inputs[0] is None:
        return value, []
    return q.inputs[0], [q, dq]


def check_silu(ctx: LintContext) -> Iterator[Finding]:
    """QDQ105: Q/DQ anywhere inside Conv -> Sigmoid -> Mul."""
    weighted = set(ctx.view.weighted_nodes)
    for node in ctx.graph:
        if node.op_type != "Mul" or len(node.inputs) != 2 or not is_default_domain(node):
            continue
        (a, qa), (b, qb) = (_unwrap(ctx, v) for v in node.inputs)
        for sig_side, other, q_sig, q_other in ((a, b, qa, qb), (b, a, qb, qa)):
            sig = sig_side.producer() if sig_side is not None else None
            if sig is None or sig.op_type != "Sigmoid":
                continue
            base, q_in = _unwrap(ctx, sig.inputs[0])
            if base is None or base is not other:
                continue
            producer = base.producer()
            if producer is None or (producer not in weighted and producer.op_type not in (
                    "BatchNormalization", "Add")):
                continue
            inside = q_sig + q_other + q_in
            if inside:
                names = sorted({name_of(n) for n in inside})
                yield ctx.finding(
                    "QDQ105", f"SiLU '{name_of(sig)}'/'{name_of(node)}' after '{name_of(producer)}' "
                    f"has Q/DQ inside ({', '.join(names)})",
                    nodes=[*names, name_of(sig), name_of(node)], tensors=[base.name or ""],
                    cost="Sigmoid/Mul run as a separate pointwise layer; the conv epilogue is lost",
                )
            break


def check_deconv_activation(ctx: LintContext) -> Iterator[Finding]:
    """QDQ106: ConvTranspose whose fused chain holds an activation."""
    for block in ctx.prediction.blocks:
        if block.weighted is None or block.weighted.op_type != "ConvTranspose":
            continue
        acts = [n for n in block.nodes if n.op_type in ACTIVATIONS]
        quantized = block.weight is not None and block.weight.quantized
        if acts and quantized:
            yield ctx.finding(
                "QDQ106", f"ConvTranspose '{name_of(block.weighted)}' + {acts[0].op_type} "
                f"'{name_of(acts[0])}'", nodes=[name_of(block.weighted), name_of(acts[0])],
                cost="predicted fused; reported unfused on TensorRT 10.x -- verify on an engine",
            )


def check_pad_qdq(ctx: LintContext) -> Iterator[Finding]:
    """QDQ107: Pad -> Q -> DQ -> Conv."""
    for node in ctx.view.weighted_nodes:
        if node.op_type not in ("Conv", "ConvTranspose") or not node.inputs:
            continue
        base, pair = _unwrap(ctx, node.inputs[0])
        pad = base.producer() if base is not None and pair else None
        if pad is not None and pad.op_type == "Pad":
            layer = ctx.layer_of(pad)
            yield ctx.finding(
                "QDQ107", f"'{name_of(pair[0])}'/'{name_of(pair[1])}' between Pad '{name_of(pad)}' "
                f"and {node.op_type} '{name_of(node)}'",
                nodes=[name_of(pad), *(name_of(n) for n in pair), name_of(node)],
                cost=f"Pad stays a separate layer ({layer.precision if layer else 'float'}) plus "
                "a Quantize Reformat",
            )


def check_channel_alignment(ctx: LintContext) -> Iterator[Finding]:
    """QDQ108: INT8 conv channels not a multiple of 32 (F1), groups not a multiple of 4 (F2)."""
    walk = ctx.prediction.walk
    for block in ctx.prediction.blocks:
        node, ref = block.weighted, block.weight
        layer = walk.layer_of_block.get(block)
        if node is None or ref is None or node.op_type != "Conv" or layer is None:
            continue
        if not layer.extra.get("int8_compute") or ref.source.shape is None:
            continue
        shape = [d for d in ref.source.shape if isinstance(d, int)]
        if len(shape) < 2:
            continue
        group_attr = node.attributes.get("group")
        group = group_attr.as_int() if group_attr is not None else 1
        cout, cin = shape[0], shape[1] * group
        if group > 1 and group == cin == cout:
            continue  # depthwise: its own kernels
        odd = [(what, c) for what, c in (("input", cin), ("output", cout)) if c > 4 and c % 32]
        if group > 1 and (shape[1] % 4 or (cout // group) % 4):
            odd.append(("per-group", shape[1]))
        if not odd:
            continue
        what, channels = odd[0]
        padded = math.ceil(channels / 32) * 32
        waste = 1 - channels / padded
        yield ctx.finding(
            "QDQ108", f"{node.op_type} '{name_of(node)}': {channels} {what} channels",
            nodes=[name_of(node)],
            cost=f"CHW32 pads {channels} -> {padded} ({waste:.0%} of the INT8 work wasted) or "
            "CHW4 kernels with a layout Reformat",
        )
