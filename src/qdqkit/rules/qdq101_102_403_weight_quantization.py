"""QDQ101, QDQ102, QDQ403, QDQ413: how a weighted op's activation and weight are quantized (D1, C1,
D7).

1. QDQ101: exactly one of the activation (through DQ, usable by TensorRT) and the weight is INT8:
   the op runs float and the DQ in front of it becomes a Reformat. A weight in another type
   (FP8, INT4, FP4: a weight-only INT4 GEMM is intended) is QDQ410/QDQ411's.
2. QDQ102: in a quantized model, a weighted op with neither side quantized runs float. Not
   reported where INT8 would not pay: its input comes from a layer that cannot write INT8 (a
   float layer, or an INT8 conv whose fused residual input is float, C3), so its Q would be a
   Reformat of its own, and the cost model says the op saves less in INT8, with the Q Reformats
   after it that its own INT8 output would remove, than that Reformat costs (E1;
   ``trt.placement.costs``, the rule ``quantize`` places by), nor
   where the model records the op as kept float on purpose (``core.kept_float``: ``quantize``
   writes why, e.g. a whole INT8 region that would not pay, which one op's view cannot see),
   nor where the placement's size rule keeps it float (``trt.placement.sizes``: too few
   channels, a GEMV-shaped or tiny GEMM; C15, C20), as ``quantize`` and ``fix`` place it.
3. QDQ403: a float weight quantized with a single scale (and more than one output channel),
   which ``fix`` quantizes again per channel from its float values; QDQ413: the same for an int8
   weight stored behind its DQ alone, which has no float values left to start from.
One check: all four read the same weight reference and activation of each weighted block.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity, replace_by_placement

if TYPE_CHECKING:
    import onnx_ir as ir

    from qdqkit.rules.model_context import LintContext
    from qdqkit.trt.engine import EngineLayer

RULES = (
    Rule(
        code="QDQ101",
        name="weighted-op-half-quantized",
        severity=Severity.ERROR,
        summary="a weighted op has a quantized weight but a float activation, or the reverse",
        why=(
            "TensorRT runs a weighted op INT8 only with DQ on both the activation and the weight; "
            "otherwise it runs FP16/FP32 and any DQ in front of it becomes a standalone Reformat."
        ),
        what_to_do=(
            "Quantize the missing side: Q/DQ on the activation input, per-channel Q/DQ on the "
            "weight."
        ),
        fixable=True,
        rule_id="D1, C1",
        how_it_checks=(
            "For each Conv/ConvTranspose/Gemm/MatMul with a constant weight: exactly one of "
            "(activation through DQ, weight through DQ) holds."
        ),
    ),
    Rule(
        code="QDQ102",
        name="weighted-op-not-quantized",
        severity=Severity.WARNING,
        summary=(
            "a weighted op in a quantized model has neither its activation nor its weight "
            "quantized"
        ),
        why=(
            "It runs in FP16 (FP32 when strongly typed) between INT8 neighbours: Reformats on "
            "both sides."
        ),
        what_to_do=(
            "Quantize it, or keep it float on purpose (GEMV-shaped or tiny layers, C15/C20)."
        ),
        fixable=True,
        rule_id="D1, C15",
        how_it_checks=(
            "The model has Q/DQ nodes and a weighted op with a constant weight has no DQ on "
            "either input, unless its input comes from a float layer and the cost model says "
            "INT8 would save less than the Reformat quantizing it costs, or the op is too small "
            "to gain from INT8 (too few channels, a GEMV-shaped or tiny GEMM)."
        ),
    ),
    Rule(
        code="QDQ403",
        name="per-tensor-weight",
        severity=Severity.INFO,
        summary="a float weight is quantized per tensor",
        why=(
            "Per-tensor weight scales cost accuracy: a channel of small weights gets the largest "
            "channel's step, and loses every value below half of it. TensorRT recommends "
            "per-channel weights."
        ),
        what_to_do="Quantize weights per output channel (fix does, from the float weight).",
        fixable=True,
        rule_id="D7, A5",
        how_it_checks="A weighted op's weight is float -> Q -> DQ with a single scale.",
    ),
    Rule(
        code="QDQ413",
        name="per-tensor-int8-weight",
        severity=Severity.INFO,
        summary="an int8 weight is stored quantized per tensor",
        why=(
            "Per-tensor weight scales cost accuracy, and the model keeps only the int8 values: "
            "no float weight is left to quantize per channel."
        ),
        what_to_do="Quantize per output channel where the model is made (onnxruntime: "
                   "per_channel=True).",
        fixable=False,
        rule_id="D7, A5",
        how_it_checks="A weighted op's weight is an int8 constant behind a DQ with a single scale.",
    ),
)


fix: Fix | None = replace_by_placement


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.qdq import INT8_TYPES, node_label
    from qdqkit.rules.model_context import module_label

    prediction = ctx.prediction
    quantized_model = ctx.view.qdq_count > 0
    for block in prediction.blocks:
        node, ref = block.weighted, block.weight
        if node is None or ref is None:
            continue
        activation = block.activation_input()
        act_int8 = prediction.int8_of(activation) is not None
        layer = prediction.block_layer(block)
        runs = str(layer.precision) if layer is not None else "float"
        where = f"{node.op_type} '{node_label(node)}'"
        if ref.quantized and ref.params is not None and not ref.params.per_channel:
            shape = prediction.shape_of(ref.source)
            channels = shape[0] if shape is not None and len(shape) else None
            if channels is None or channels != 1:
                code = "QDQ403" if ref.quantize is not None else "QDQ413"
                yield ctx.finding(code, f"{where}: weight '{ref.source.name}' has one scale",
                                  nodes=[node_label(ref.dequantize)] if ref.dequantize else [],
                                  tensors=[ref.source.name or ""], cost="accuracy, not speed")
        # A DQ that TensorRT cannot use (zero point, per-channel) is reported by QDQ401/QDQ402.
        act_dq = ctx.dq_of(activation) is not None
        if ref.params is not None and ref.params.quant_dtype not in INT8_TYPES:
            continue  # FP8/INT4/FP4 weights (weight-only GEMMs among them): QDQ410/QDQ411
        if act_int8 != ref.quantized and not (act_dq and not act_int8):
            half = ("the weight is quantized but the activation "
                    f"'{activation.name if activation else '?'}' is float"
                    if ref.quantized else "the activation is quantized but the weight is float")
            before = [
                r for r in prediction.engine.layers
                if r.origin == "QDQ" and layer is not None and r.outputs
                and any(t.name == r.outputs[0].name for t in layer.inputs)
            ]
            yield ctx.finding(
                "QDQ101", f"{where}: {half}", nodes=[node_label(node)],
                tensors=[activation.name or ""] if activation is not None else [],
                cost=ctx.reformat_cost(before, f"{module_label(block)} runs {runs}"),
            )
        elif (not ref.quantized and quantized_model and node_label(node) not in ctx.kept_float
              and not _too_small(ctx, node, ref.source, activation)
              and not _int8_would_not_pay(ctx, layer, activation)):
            yield ctx.finding("QDQ102", f"{where} is not quantized", nodes=[node_label(node)],
                              cost=f"runs {runs} inside a quantized model")


def _too_small(ctx: LintContext, node: ir.Node, weight: ir.Value,
               activation: ir.Value | None) -> bool:
    """The size rule's exception of QDQ102 (module docstring, rule 2)."""
    from qdqkit.trt.placement.sizes import too_small

    first = activation is not None and activation.is_graph_input()
    return too_small(node, weight, ctx.prediction.facts.shape_of, first) is not None


def _int8_would_not_pay(ctx: LintContext, layer: EngineLayer | None,
                        activation: ir.Value | None) -> bool:
    """The exception of QDQ102 (module docstring, rule 2)."""
    from qdqkit.trt.gpus import DEFAULT_GPU
    from qdqkit.trt.placement.costs import int8_saving, reformat_time

    if layer is None or activation is None or not layer.inputs:
        return False
    producer = ctx.prediction.producer_layer(activation)
    if producer is not None:
        cost = ctx.prediction.cost_of(producer)
        if producer.is_reformat:
            return False
        if (cost is not None and cost.int8_compute
                and all(t.precision.is_quantized for t in producer.inputs)):
            return False  # a Q on an INT8 layer's output fuses into it: nothing to weigh
        # An INT8 conv that fused a float residual input writes float (C3): its Q stands alone.
    gpu = ctx.latency.gpu if ctx.latency is not None else DEFAULT_GPU
    tensor = next((t for t in layer.inputs if t.name == activation.name), layer.inputs[0])
    # A Q Reformat reading the op's float output goes too: in INT8 the op writes INT8 itself.
    after = sum(reformat_time(r.inputs[0], gpu) for r in ctx.prediction.reformats_reading(layer)
                if r.inputs and r.outputs and r.outputs[0].precision.is_quantized)
    return int8_saving(layer, gpu) + after <= reformat_time(tensor, gpu)
