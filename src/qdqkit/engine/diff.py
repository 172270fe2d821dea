"""``diff_engines(a, b)``: what changed between two engines, and why B is slower or faster.

Layers are paired by ``trt.engine_matching``. A pair is *evidenced* when its two layers share an
ONNX node name or read the same input shape; when evidenced pairs cover less than half of the
arithmetic layers of the smaller engine (two different networks, or a names-only export, which has
no shapes, against an engine with other names), the pairs rest on kind and position alone: the
summary says so and draws nothing from them. A side without precisions (names-only) is never
compared by precision.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from qdqkit.core.text import plural
from qdqkit.trt.engine import EngineGraph, EngineLayer, Precision
from qdqkit.trt.engine_analysis import latency_sum, precision_signature
from qdqkit.trt.engine_json import is_compute_layer
from qdqkit.trt.engine_matching import Matching, match_layers
from qdqkit.trt.engine_timing import end_to_end_of
from qdqkit.trt.layer_signature import input_shape, is_skeleton
from qdqkit.trt.onnx_names import unwrap_node_names


@dataclass
class EngineSide:
    source: str
    layers: int
    compute_layers: int
    reformats: int
    qdq_reformats: int
    layout_reformats: int
    int8_compute_layers: int | None  # None for a names-only export: precisions unknown
    layer_latency_ms: float | None  # sum of the per-layer profile times
    layer_latency_measure: str | None  # what was summed: "averageMs", "medianMs" or "predicted"
    end_to_end_median_ms: float | None  # whole-inference median, when the timing was given


@dataclass
class LayerMatch:
    a: str
    b: str
    kind_a: str
    kind_b: str
    precision_a: str  # signature, e.g. "INT8+FP16 → FP16"
    precision_b: str
    output_a: str
    output_b: str
    latency_a_ms: float | None
    latency_b_ms: float | None
    delta_ms: float | None


@dataclass
class FusedGroup:
    """Layers of one engine that the other engine runs as a single layer."""

    engine: str  # "a" when layers of A were fused into one layer of B, else "b"
    into: str
    layers: list[str]
    latency_before_ms: float | None
    latency_after_ms: float | None


@dataclass
class LoneLayer:
    name: str
    kind: str
    precision: str
    origin: str | None
    latency_ms: float | None


@dataclass
class MatchedLayers:
    """The compared engines and their layers as matched, for callers that judge layers themselves
    (``lint --engine``): every matched pair, including those inside a fused group."""

    a: EngineGraph
    b: EngineGraph
    pairs: list[tuple[EngineLayer, EngineLayer]]
    only_a: list[EngineLayer]
    only_b: list[EngineLayer]


@dataclass
class MatchEvidence:
    """How far the layer pairs can be trusted (see the module docstring)."""

    evidenced_pairs: int  # arithmetic-layer pairs sharing an ONNX node name or an input shape
    smaller_engine_layers: int  # arithmetic layers of the engine that has fewer
    weak: bool  # evidenced pairs cover less than half of them: the pairs are guesses


@dataclass
class EngineDiff:
    a: EngineSide
    b: EngineSide
    match_evidence: MatchEvidence
    matched: list[LayerMatch]
    precision_changes: list[LayerMatch]
    fused: list[FusedGroup]
    only_in_a: list[LoneLayer]
    only_in_b: list[LoneLayer]
    summary: list[str]
    layers: MatchedLayers = field(repr=False)

    def to_json(self) -> dict[str, Any]:
        # The layer objects are already described by the fields above.
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "layers"}


def _measure(graph: EngineGraph) -> str | None:
    if latency_sum(graph.layers) is None:
        return None
    return "predicted" if graph.source == "predicted" else graph.metadata.get("profile_measure")


def _side(graph: EngineGraph) -> EngineSide:
    compute = [la for la in graph.layers if is_compute_layer(la)]
    reformats = graph.reformats()
    qdq = [la for la in reformats if la.origin == "QDQ"]
    end_to_end = end_to_end_of(graph)
    return EngineSide(
        source=graph.source,
        layers=len(graph.layers),
        compute_layers=len(compute),
        reformats=len(reformats),
        qdq_reformats=len(qdq),
        layout_reformats=len(reformats) - len(qdq),
        int8_compute_layers=None if graph.metadata.get("names_only") else sum(
            1 for la in compute if la.precision is Precision.INT8),
        layer_latency_ms=latency_sum(graph.layers),
        layer_latency_measure=_measure(graph),
        end_to_end_median_ms=end_to_end.median_ms if end_to_end else None,
    )


def _delta(a: float | None, b: float | None) -> float | None:
    return round(b - a, 6) if a is not None and b is not None else None


def _lone(layer: EngineLayer) -> LoneLayer:
    return LoneLayer(layer.name, layer.kind.value, precision_signature(layer), layer.origin,
                     layer.latency_ms)


def signed_ms(value: float) -> str:
    """``+0.012`` or ``-0.007`` ms; a change that rounds to nothing is ``0.000``, never ``-0.000``."""
    text = f"{value:+.3f}"
    return "0.000" if float(text) == 0 else text


def _times(ratio: float) -> str:
    """``1.62x``, ``681x``: a ratio of times, with two decimals only while they mean something."""
    return f"{ratio:.2f}x" if ratio < 10 else f"{ratio:.0f}x"


def _headline(a: EngineSide, b: EngineSide) -> str | None:
    # A ratio, not a percentage: "100% faster" is what a 680-fold speed-up rounds to.
    for label, before, after in (
        ("end-to-end median", a.end_to_end_median_ms, b.end_to_end_median_ms),
        ("summed layer time", a.layer_latency_ms, b.layer_latency_ms),
    ):
        if before and after:
            times = f"{label} {before:.3f} → {after:.3f} ms"
            if round(after, 6) == round(before, 6):
                return f"A and B take the same time: {label} {before:.3f} ms"
            if after < before:
                return f"B is faster: A takes {_times(before / after)} B's time ({times})"
            return f"B is slower: B takes {_times(after / before)} A's time ({times})"
    return None


def _evidence(a: EngineGraph, b: EngineGraph, matching: Matching) -> MatchEvidence:
    evidenced = 0
    for i, j in matching.pairs:
        la, lb = a.layers[i], b.layers[j]
        if not (is_skeleton(la) and is_skeleton(lb)):
            continue
        shared_name = set(unwrap_node_names(la.onnx_nodes)) & set(unwrap_node_names(lb.onnx_nodes))
        shape = input_shape(la)
        if shared_name or (shape is not None and shape == input_shape(lb)):
            evidenced += 1
    smaller = min(sum(map(is_skeleton, a.layers)), sum(map(is_skeleton, b.layers)))
    return MatchEvidence(evidenced, smaller, weak=evidenced * 2 < smaller)


def _precision_story(changes: list[LayerMatch], timed: bool) -> list[str]:
    """Layers grouped by their change of output precision; with ``timed`` (both engines
    profiled) the time each group took before and after."""
    groups: dict[tuple[str, str], list[LayerMatch]] = {}
    for change in changes:
        if change.output_a != change.output_b:
            groups.setdefault((change.output_a, change.output_b), []).append(change)
    lines = []
    for (before, after), items in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        time_a = sum(m.latency_a_ms or 0.0 for m in items)
        time_b = sum(m.latency_b_ms or 0.0 for m in items)
        timing = (f"; their time {time_a:.3f} → {time_b:.3f} ms" if timed and (time_a or time_b)
                  else "")
        verb = "writes" if len(items) == 1 else "write"
        lines.append(f"{plural(len(items), 'layer')} now {verb} {after} instead of {before} (e.g. "
                     f"'{items[0].b}'){timing}")
    return lines


def _time_story(diff: EngineDiff) -> list[str]:
    """Where the summed layer time went, by the matching, biggest contribution first."""
    parts: list[tuple[float, str]] = []
    gone = [la for la in diff.only_in_a if la.latency_ms]
    if gone:
        cost = sum(la.latency_ms or 0.0 for la in gone)
        qdq = sum(1 for la in gone if la.origin == "QDQ")
        what = f", {qdq} of them Q/DQ Reformats" if qdq else ""
        parts.append((-cost, f"{plural(len(diff.only_in_a), 'layer')} of A gone in B{what}: "
                             f"{signed_ms(-cost)} ms"))
    new = [la for la in diff.only_in_b if la.latency_ms]
    if new:
        cost = sum(la.latency_ms or 0.0 for la in new)
        parts.append((cost, f"{plural(len(diff.only_in_b), 'layer')} new in B: "
                            f"{signed_ms(cost)} ms"))
    for group in diff.fused:
        delta = _delta(group.latency_before_ms, group.latency_after_ms)
        if delta:
            side = "B" if group.engine == "a" else "A"
            parts.append((delta, f"{len(group.layers)} layers run fused in {side} as "
                                 f"'{group.into}': {signed_ms(delta)} ms"))
    matched_delta = sum(m.delta_ms or 0.0 for m in diff.matched)
    if any(m.delta_ms for m in diff.matched):
        parts.append((matched_delta, f"the {len(diff.matched)} layers in both engines: "
                                     f"{signed_ms(matched_delta)} ms"))
    return [text for _, text in sorted(parts, key=lambda p: -abs(p[0]))]


def _summary(diff: EngineDiff) -> list[str]:
    a, b = diff.a, diff.b
    lines = []
    timed = a.layer_latency_ms is not None and b.layer_latency_ms is not None
    headline = _headline(a, b)
    if headline:
        lines.append(headline)
    evidence = diff.match_evidence
    if evidence.weak:
        lines.append(
            f"the layer pairs are guesses: only {evidence.evidenced_pairs} of the "
            f"{evidence.smaller_engine_layers} arithmetic layers of the smaller engine pair with a "
            "layer sharing an ONNX node name or input shape, as between different networks; "
            "compare the totals, not the layers")
    elif timed:  # with one engine unprofiled, its side of every difference would read 0 ms
        lines += _time_story(diff)
    if (a.reformats, a.qdq_reformats) != (b.reformats, b.qdq_reformats):
        lines.append(f"Reformat layers {a.reformats} → {b.reformats} (from Q/DQ "
                     f"{a.qdq_reformats} → {b.qdq_reformats}, layout {a.layout_reformats} → "
                     f"{b.layout_reformats})")
    unknown = [name for name, side in (("A", a), ("B", b)) if side.int8_compute_layers is None]
    if unknown:
        lines.append(f"precisions are unknown in {' and '.join(unknown)} (a names-only export): "
                     "precision changes are not compared")
    elif not evidence.weak:
        lines += _precision_story(diff.precision_changes, timed)
    known = a.int8_compute_layers is not None and b.int8_compute_layers is not None
    if known and a.int8_compute_layers != b.int8_compute_layers:
        lines.append(f"INT8 compute layers {a.int8_compute_layers}/{a.compute_layers} → "
                     f"{b.int8_compute_layers}/{b.compute_layers}")
    if not lines:
        lines.append("the two engines have the same layers, precisions and Reformats")
    return lines


def diff_engines(a: EngineGraph, b: EngineGraph) -> EngineDiff:
    """Compare two engines layer by layer (matched by fused ONNX nodes; see ``matching``)."""
    matching = match_layers(a, b)
    matched = []
    for i, j in matching.pairs:
        la, lb = a.layers[i], b.layers[j]
        matched.append(LayerMatch(
            a=la.name, b=lb.name, kind_a=la.kind.value, kind_b=lb.kind.value,
            precision_a=precision_signature(la), precision_b=precision_signature(lb),
            output_a=la.output_precision.value, output_b=lb.output_precision.value,
            latency_a_ms=la.latency_ms, latency_b_ms=lb.latency_ms,
            delta_ms=_delta(la.latency_ms, lb.latency_ms),
        ))
    fused = []
    for j, group in sorted(matching.fused_into_b.items()):
        # The B layer's time is compared with A's partner layer plus the layers folded into it.
        partners = [i for i, jj in matching.pairs if jj == j] + group
        fused.append(FusedGroup("a", b.layers[j].name, [a.layers[i].name for i in sorted(partners)],
                                latency_sum([a.layers[i] for i in partners]),
                                latency_sum([b.layers[j]])))
    for i, group in sorted(matching.fused_into_a.items()):
        partners = [j for ii, j in matching.pairs if ii == i] + group
        fused.append(FusedGroup("b", a.layers[i].name, [b.layers[j].name for j in sorted(partners)],
                                latency_sum([a.layers[i]]),
                                latency_sum([b.layers[j] for j in partners])))
    # A layer that took part in a fusion is explained by its group, not by its pair delta.
    in_groups = {name for g in fused for name in [g.into, *g.layers]}
    side_a, side_b = _side(a), _side(b)
    # A names-only side has no precisions: "UNKNOWN → INT8" would be no change at all.
    both_known = side_a.int8_compute_layers is not None and side_b.int8_compute_layers is not None
    diff = EngineDiff(
        a=side_a, b=side_b, match_evidence=_evidence(a, b, matching),
        matched=[m for m in matched if m.a not in in_groups and m.b not in in_groups],
        precision_changes=[m for m in matched
                           if both_known and m.precision_a != m.precision_b],
        fused=fused,
        only_in_a=[_lone(a.layers[i]) for i in matching.only_a],
        only_in_b=[_lone(b.layers[j]) for j in matching.only_b],
        summary=[],
        layers=MatchedLayers(
            a, b, [(a.layers[i], b.layers[j]) for i, j in matching.pairs],
            [a.layers[i] for i in matching.only_a], [b.layers[j] for j in matching.only_b],
        ),
    )
    diff.summary = _summary(diff)
    return diff


def short_source(side: EngineSide) -> str:
    return Path(side.source).name if side.source != "predicted" else "predicted"
