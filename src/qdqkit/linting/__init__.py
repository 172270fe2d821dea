"""``qdqkit lint`` and ``qdqkit.lint()``: predict the TensorRT engine, name every fusion breaker.

``lint(model, trt=..., target=..., engine=...)`` runs the engine predictor, then every model rule
of the registry (``qdqkit.rules``) over the prediction, and returns findings grouped by rule with
the predicted engine summary; with ``engine=`` a real ``trtexec --exportLayerInfo`` export, it
also diffs the predicted engine against the real one and lists where they disagree.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import onnx_ir as ir

from qdqkit.core.gc_pause import paused_cyclic_gc
from qdqkit.core.kept_float import kept_float
from qdqkit.core.model_io import load_model
from qdqkit.linting.catalog import RULES, Severity
from qdqkit.linting.result import EngineComparison, EngineSummary, LintResult, RuleGroup
from qdqkit.rules import Finding, units_for
from qdqkit.rules.model_context import LintContext
from qdqkit.trt.cost_model import LatencyComparison
from qdqkit.trt.engine import EngineGraph, Precision
from qdqkit.trt.gpus import default_device, find_gpu
from qdqkit.trt.predict import Prediction, run_prediction


def run_rules(ctx: LintContext) -> list[Finding]:
    """Every model rule's findings; units that run last see what the others found."""
    units = [unit for unit in units_for("model") if unit.judges(ctx.prediction.target)]
    findings: list[Finding] = []
    for unit in units:
        if not unit.runs_last:
            findings.extend(unit.run(ctx))
    earlier = list(findings)
    for unit in units:
        if unit.runs_last:
            findings.extend(unit.run(ctx, earlier))
    return findings


def summarize(predicted: EngineGraph) -> EngineSummary:
    by_precision: dict[str, int] = {}
    for layer in predicted.layers:
        if not layer.is_reformat:
            key = layer.precision.value
            by_precision[key] = by_precision.get(key, 0) + 1
    costs = [layer.cost for layer in predicted.layers if layer.cost is not None]
    total = sum(c.macs for c in costs if c.macs is not None)
    int8 = sum(c.macs for c in costs if c.macs is not None and c.int8_compute)
    devices: dict[str, int] = {}
    if predicted.target == "dla":
        for layer in predicted.layers:
            devices[layer.device] = devices.get(layer.device, 0) + 1
    return EngineSummary(
        layers=len(predicted.layers),
        layers_by_precision=dict(sorted(by_precision.items())),
        reformats=len(predicted.reformats()),
        qdq_reformats=len(predicted.qdq_reformats()),
        int8_macs=int8 if total else None,
        total_macs=total or None,
        int8_mac_share=(int8 / total) if total else None,
        elided_nodes=len(predicted.metadata.get("elided_nodes", [])),
        int8_output_layers=sum(
            1 for layer in predicted.layers
            if not layer.is_reformat and layer.output_precision == Precision.INT8
        ),
        devices=devices,
        unsized_layers=[layer.name for layer in predicted.layers
                        if layer.cost is not None and layer.cost.macs is None],
    )


def _predict_and_check(model: ir.Model | str | os.PathLike[str], name: str, trt: str | None,
                       target: str | None, gpu: str | None, shapes: str | None) -> LintResult:
    from qdqkit.core.shape_spec import parse_shapes
    from qdqkit.linting.latency import apply_shapes, compare_latency
    from qdqkit.trt.build_record import resolve_build

    # The caller's model is never changed: --shapes goes into a copy.
    own = model.clone() if shapes and isinstance(model, ir.Model) else model
    loaded = own if isinstance(own, ir.Model) else load_model(own)
    trt, target, from_model = resolve_build(loaded, trt, target)
    device = find_gpu(gpu or default_device(target))
    if shapes:
        apply_shapes(loaded, parse_shapes(shapes))
    prediction = run_prediction(loaded, trt=trt, target=target)
    if not isinstance(model, ir.Model):
        prediction.engine.metadata["model"] = os.fspath(model)
    latency = compare_latency(loaded, prediction.engine, prediction.trt, device,
                              prediction.facts.types)
    result = check_prediction(prediction, name, latency, kept_float(loaded))
    result.from_model = from_model
    return result


def check_prediction(prediction: Prediction, name: str,
                     latency: LatencyComparison | None = None,
                     kept: Mapping[str, str] | None = None) -> LintResult:
    """Every model rule over ``prediction``, grouped by rule, with the engine summary; without
    ``latency`` the rules reading the latency comparison find nothing; ``kept`` are the weighted
    ops the model records as kept float on purpose (``core.kept_float``)."""
    ctx = LintContext(prediction, latency, dict(kept or {}))
    by_code: dict[str, list[Finding]] = {}
    for finding in run_rules(ctx):
        by_code.setdefault(finding.code, []).append(finding)
    groups = [RuleGroup.of(rule, by_code[rule.code]) for rule in RULES if rule.code in by_code]
    predicted = prediction.engine
    return LintResult(
        model=name, trt=prediction.trt, target=prediction.target,
        quantized=ctx.view.qdq_count > 0, groups=groups,
        summary=summarize(predicted), engine=predicted, latency=latency,
    )


def lint(
    model: ir.Model | str | os.PathLike[str],
    *,
    trt: str | None = None,
    target: str | None = None,
    engine: str | os.PathLike[str] | None = None,
    gpu: str | None = None,
    shapes: str | None = None,
) -> LintResult:
    """Predict the engine of ``model`` and run every lint rule over it.

    ``trt`` and ``target`` left out: what ``qdqkit quantize`` recorded in the model, else 8.6
    and gpu (``trt.build_record``).

    ``engine`` is the path of a real engine's ``trtexec --exportLayerInfo`` JSON to compare the
    prediction with. ``gpu`` (a name of ``trt.gpus``; by default an A100, a DLA core for
    ``target="dla"``) and ``shapes`` (trtexec's ``--shapes``
    spelling) set what the latency cost model times the engine on and with.
    """
    real_engine_path = engine
    name = "<in-memory model>" if isinstance(model, ir.Model) else os.fspath(model)
    with paused_cyclic_gc():
        # The graph IR is a million small objects linked both ways. It is garbage once the result
        # is built, so it is dropped (on return) before the pause ends: the collector's first pass
        # then frees it at once instead of rescanning it, alive, generation after generation.
        result = _predict_and_check(model, name, trt, target, gpu, shapes)
    if real_engine_path is not None:
        from qdqkit.engine.diff import diff_engines
        from qdqkit.trt.engine_json import read_engine_graph

        real = read_engine_graph(Path(real_engine_path))
        result.comparison = EngineComparison.of(diff_engines(result.engine, real))
    return result


__all__ = ["RULES", "LintResult", "Severity", "lint"]
