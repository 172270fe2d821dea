"""``report_engine(graph)``: where an engine's layers and time go, and what to fix first.

The findings are the engine-level rules of the catalog (``qdqkit.rules``, QDQ6xx), run in code
order over an ``EngineContext``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from qdqkit.rules import Finding, units_for
from qdqkit.rules.engine_context import EngineContext, ReformatInfo
from qdqkit.trt.engine import EngineGraph, EngineLayer, LayerKind, Precision
from qdqkit.trt.engine_analysis import (
    is_copy_node,
    latency_sum,
    precision_signature,
    topology,
)
from qdqkit.trt.engine_json import NON_COMPUTE_ROLES, is_compute_layer, non_compute_role
from qdqkit.trt.engine_timing import end_to_end_of


@dataclass
class Bucket:
    """Layers sharing a key (a kind, a precision, or both) and the time they take."""

    key: str
    layers: int
    latency_ms: float | None


@dataclass
class SlowLayer:
    name: str
    kind: str
    precision: str
    latency_ms: float
    share: float  # of the summed layer time


@dataclass
class EngineReport:
    source: str
    schema: str
    layer_count: int
    compute_layer_count: int
    # The other layers by role (``trt.engine_json.non_compute_role``); Reformat and NoOp always
    # listed.
    non_compute_counts: dict[str, int]
    has_profile: bool
    names_only: bool
    by_kind: list[Bucket]
    by_precision: list[Bucket]
    by_kind_and_precision: list[Bucket]
    reformats: list[ReformatInfo]
    qdq_reformat_count: int
    layout_reformat_count: int
    copy_noop_count: int  # NoOp layers named "Reformatting CopyNode ...": zero-cost views
    int8_layer_share: float | None
    int8_time_share: float | None
    total_layer_latency_ms: float | None
    layer_latency_measure: str | None  # the profile field summed: "averageMs" or "medianMs"
    end_to_end_median_ms: float | None
    end_to_end_source: str | None
    slowest: list[SlowLayer]
    findings: list[Finding]


def _buckets(groups: dict[str, list[EngineLayer]]) -> list[Bucket]:
    rows = [Bucket(key, len(layers), latency_sum(layers)) for key, layers in groups.items()]
    # Most expensive first; without a profile, most numerous first; ties by name for determinism.
    rows.sort(key=lambda b: (-(b.latency_ms or 0.0), -b.layers, b.key))
    return rows


def _group(
    layers: list[EngineLayer], key_of: Callable[[EngineLayer], str]
) -> dict[str, list[EngineLayer]]:
    groups: dict[str, list[EngineLayer]] = defaultdict(list)
    for layer in layers:
        groups[key_of(layer)].append(layer)
    return groups


def _reformat_infos(graph: EngineGraph) -> list[ReformatInfo]:
    topo = topology(graph)
    infos = []
    for i, layer in enumerate(graph.layers):
        if not layer.is_reformat:
            continue
        neighbours = [graph.layers[j] for j in topo.preds[i] + topo.succs[i]]
        next_to_qdq = layer.origin != "QDQ" and any(
            n.is_reformat and n.origin == "QDQ" for n in neighbours
        )
        infos.append(ReformatInfo(
            name=layer.name,
            origin=layer.origin or "layout",
            from_precision=layer.input_precision.value,
            to_precision=layer.output_precision.value,
            from_format=layer.inputs[0].format if layer.inputs else None,
            to_format=layer.outputs[0].format if layer.outputs else None,
            latency_ms=layer.latency_ms,
            next_to_qdq=next_to_qdq,
        ))
    return infos


def _non_compute_counts(graph: EngineGraph) -> dict[str, int]:
    roles = [non_compute_role(layer) for layer in graph.layers]
    return {role: roles.count(role) for role in NON_COMPUTE_ROLES
            if role in ("Reformat", "NoOp") or role in roles}


def _with_unmatched_time(finding: Finding, graph: EngineGraph) -> Finding:
    """The profile-mismatch finding with the time its records hold: every figure of the report
    leaves that time out, so the reader must see how much it is."""
    unmatched = finding.layers
    lost = graph.metadata.get("unmatched_profile_ms")
    whole = graph.metadata.get("profile_ms")
    if lost is None or not whole:
        return finding
    records = EngineContext.counted(len(unmatched), "profile record", "name")
    their = "its" if len(unmatched) == 1 else "their"
    return replace(
        finding, latency_ms=lost,
        message=f"{records} no layer of this engine (first: {unmatched[0]!r}); {their} "
        f"{lost:.3f} ms ({lost / whole:.1%} of the profile's time) is left out of every figure "
        "here; were the two files exported from the same build?",
    )


def _findings(graph: EngineGraph, reformats: list[ReformatInfo], names_only: bool) -> list[Finding]:
    ctx = EngineContext(graph, reformats, names_only)
    findings = [finding for unit in units_for("engine") for finding in unit.run(ctx)]
    return [_with_unmatched_time(f, graph) if f.code == "QDQ602" and f.layers else f
            for f in findings]


def report_engine(graph: EngineGraph, top: int = 10) -> EngineReport:
    """Summarize ``graph``: counts and time by kind and precision, Reformats, findings."""
    compute = [layer for layer in graph.layers if is_compute_layer(layer)]
    total = latency_sum(graph.layers)
    int8_compute = [la for la in compute if la.precision is Precision.INT8]
    int8_time = latency_sum(int8_compute)
    reformats = _reformat_infos(graph)
    names_only = bool(graph.metadata.get("names_only"))
    timed = [la for la in graph.layers if la.latency_ms is not None]
    timed.sort(key=lambda la: (-(la.latency_ms or 0.0), la.name))
    slowest = [
        SlowLayer(la.name, la.kind.value, precision_signature(la), la.latency_ms or 0.0,
                  (la.latency_ms or 0.0) / total if total else 0.0)
        for la in timed[:top]
    ]
    end_to_end = end_to_end_of(graph)
    return EngineReport(
        source=graph.source,
        schema=str(graph.metadata.get("schema", "predicted" if graph.source == "predicted" else "?")),
        layer_count=len(graph.layers),
        compute_layer_count=len(compute),
        non_compute_counts=_non_compute_counts(graph),
        has_profile=total is not None,
        names_only=names_only,
        by_kind=_buckets(_group(graph.layers, lambda la: la.kind.value)),
        by_precision=_buckets(_group(compute, lambda la: la.precision.value)),
        by_kind_and_precision=_buckets(
            _group(compute, lambda la: f"{la.kind.value} {precision_signature(la)}")
        ),
        reformats=reformats,
        qdq_reformat_count=sum(1 for r in reformats if r.origin == "QDQ"),
        layout_reformat_count=sum(1 for r in reformats if r.origin != "QDQ"),
        copy_noop_count=sum(
            1 for la in graph.layers if la.kind is LayerKind.NOOP and is_copy_node(la)
        ),
        int8_layer_share=len(int8_compute) / len(compute) if compute and not names_only else None,
        int8_time_share=(int8_time or 0.0) / total if total and not names_only else None,
        total_layer_latency_ms=total,
        layer_latency_measure=graph.metadata.get("profile_measure") if total is not None else None,
        end_to_end_median_ms=end_to_end.median_ms if end_to_end else None,
        end_to_end_source=(f"{end_to_end.measure} median, {Path(end_to_end.source).name}"
                           if end_to_end else None),
        slowest=slowest,
        findings=_findings(graph, reformats, names_only),
    )
