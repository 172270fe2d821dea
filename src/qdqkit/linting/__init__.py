"""``qdqkit lint`` and ``qdqkit.lint()``: predict the TensorRT engine, name every fusion breaker.

``lint(model, trt=..., target=..., engine=...)`` runs the engine predictor, then every check of the
rule catalog (``catalog.RULES``) over the prediction, and returns findings grouped by rule with the
predicted engine summary; with ``engine=`` a real ``trtexec --exportLayerInfo`` export, it also
lists where the prediction and the real engine disagree.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

import onnx_ir as ir

from qdqkit.core.gc_pause import paused_cyclic_gc
from qdqkit.linting.catalog import RULES, Severity
from qdqkit.linting.checks_concat_pool import check_concat, check_float_pool, check_maxpool_scales
from qdqkit.linting.checks_model import check_model, check_unexplained_reformats
from qdqkit.linting.checks_qdq import check_integer_ops, check_params, check_tensor_quantizers
from qdqkit.linting.checks_residual import (
    check_add_inputs,
    check_int8_in_float_out,
    check_residual_fusion,
)
from qdqkit.linting.checks_weighted import (
    check_channel_alignment,
    check_deconv_activation,
    check_epilogue_qdq,
    check_pad_qdq,
    check_silu,
    check_weighted_quantization,
)
from qdqkit.linting.context import LintContext
from qdqkit.linting.result import EngineSummary, Finding, LintResult, RuleGroup
from qdqkit.trt.engine import EngineGraph, Precision
from qdqkit.trt.predict import run_prediction

Check = Callable[[LintContext], Iterable[Finding]]

CHECKS: tuple[Check, ...] = (
    check_weighted_quantization, check_epilogue_qdq, check_silu, check_deconv_activation,
    check_pad_qdq, check_channel_alignment, check_residual_fusion, check_add_inputs,
    check_concat, check_maxpool_scales, check_float_pool, check_int8_in_float_out,
    check_params, check_tensor_quantizers, check_integer_ops, check_model,
)


def summarize(engine: EngineGraph) -> EngineSummary:
    by_precision: dict[str, int] = {}
    for layer in engine.layers:
        if not layer.is_reformat:
            key = layer.precision.value
            by_precision[key] = by_precision.get(key, 0) + 1
    macs = [(layer.extra.get("macs"), layer.extra.get("int8_compute")) for layer in engine.layers]
    total = sum(m for m, _ in macs if isinstance(m, int))
    int8 = sum(m for m, q in macs if isinstance(m, int) and q)
    devices: dict[str, int] = {}
    if engine.target == "dla":
        for layer in engine.layers:
            devices[layer.device] = devices.get(layer.device, 0) + 1
    return EngineSummary(
        layers=len(engine.layers),
        layers_by_precision=dict(sorted(by_precision.items())),
        reformats=len(engine.reformats()),
        qdq_reformats=len(engine.qdq_reformats()),
        int8_macs=int8 if total else None,
        total_macs=total or None,
        int8_mac_share=(int8 / total) if total else None,
        elided_nodes=len(engine.metadata.get("elided_nodes", [])),
        int8_output_layers=sum(
            1 for layer in engine.layers
            if not layer.is_reformat and layer.output_precision == Precision.INT8
        ),
        devices=devices,
    )


def lint(
    model: ir.Model | str | os.PathLike[str],
    *,
    trt: str = "8.6",
    target: str = "gpu",
    engine: str | os.PathLike[str] | None = None,
) -> LintResult:
    """Predict the engine of ``model`` and run every lint rule over it."""
    name = "<in-memory model>" if isinstance(model, ir.Model) else os.fspath(model)
    with paused_cyclic_gc():
        prediction = run_prediction(model, trt=trt, target=target)
        ctx = LintContext(prediction)
        findings: list[Finding] = []
        for check in CHECKS:
            findings.extend(check(ctx))
        named = {node for f in findings for node in f.nodes}
        findings.extend(check_unexplained_reformats(ctx, named))
    groups = []
    for rule in RULES:
        mine = [f for f in findings if f.code == rule.code]
        if mine:
            groups.append(RuleGroup.of(rule, mine))
    result = LintResult(
        model=name, trt=prediction.trt, target=prediction.target,
        quantized=ctx.view.qdq_count > 0, groups=groups,
        summary=summarize(prediction.engine), engine=prediction.engine,
    )
    if engine is not None:
        from qdqkit.linting.compare import compare_engines
        from qdqkit.trt.engine_json import read_engine_graph

        real = read_engine_graph(Path(engine))
        result.comparison = compare_engines(prediction.engine, real)
    return result


__all__ = ["RULES", "LintResult", "Severity", "lint"]
