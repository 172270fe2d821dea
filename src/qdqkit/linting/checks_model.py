"""Model- and target-level checks: QDQ501-QDQ505, and QDQ407 for Reformats nobody explained."""

from __future__ import annotations

from collections.abc import Iterator

from qdqkit.linting.context import LintContext, name_of, plural
from qdqkit.linting.result import Finding
from qdqkit.trt.engine import Precision
from qdqkit.trt.predict.ops import is_plugin


def check_model(ctx: LintContext) -> Iterator[Finding]:
    prediction = ctx.prediction
    engine = prediction.engine
    if ctx.view.qdq_count == 0:
        yield ctx.finding("QDQ501", "no QuantizeLinear/DequantizeLinear: this is a float model",
                          cost=f"all {plural(len(engine.layers), 'layer')} run float")
    for node in ctx.graph:
        if is_plugin(node):
            yield ctx.finding(
                "QDQ502", f"'{name_of(node)}' ({node.domain}::{node.op_type}) is an opaque float "
                "plugin layer", nodes=[name_of(node)], cost="float in and out")
    if prediction.strongly_typed:
        fp32 = [layer for layer in engine.layers
                if not layer.is_reformat and layer.precision == Precision.FP32]
        if fp32:
            yield ctx.finding(
                "QDQ503", f"{plural(len(fp32), 'layer')} run FP32 in a strongly typed build",
                nodes=[n for layer in fp32[:20] for n in layer.onnx_nodes[:1]],
                cost=f"{plural(len(fp32), 'FP32 layer')} that --best would have run FP16")
    if prediction.target == "dla":
        if ctx.view.qdq_count:
            yield ctx.finding("QDQ504", "Q/DQ model built for DLA",
                              cost="the INT8 DLA layers predicted here need the translated model "
                              "and cache (qdqkit translate); built from Q/DQ directly they run FP16")
        for layer in engine.layers:
            if layer.device == "GPU" and not layer.is_reformat:
                why = next((n for n in layer.notes if n.startswith("falls back")), "falls back")
                yield ctx.finding("QDQ505", f"'{layer.name}' {why}", nodes=layer.onnx_nodes[:3],
                                  cost="GPU fallback: a Reformat at each DLA boundary")


def check_unexplained_reformats(ctx: LintContext, named: set[str]) -> Iterator[Finding]:
    """QDQ407: Q/DQ Reformats that no earlier finding mentions (run last)."""
    for layer in ctx.prediction.engine.layers:
        if layer.origin != "QDQ" or any(n in named for n in layer.onnx_nodes):
            continue
        note = layer.notes[0] if layer.notes else "a standalone Q/DQ"
        yield ctx.finding("QDQ407", f"'{layer.name}': {note}", nodes=layer.onnx_nodes,
                          tensors=[t.name for t in layer.inputs],
                          cost=f"+1 Reformat layer ({layer.input_precision} -> "
                          f"{layer.output_precision})")
