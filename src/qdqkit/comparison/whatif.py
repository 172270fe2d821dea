"""What-if: the output error gained, and the engine cost paid, if one node ran FP16 instead.

1. Candidates are the nodes worst in either view (layer-wise SNR lowest, graph-wise SNR drop
   largest), alternating, up to the limit: a model of 300 quantized nodes does not need 300 runs.
2. Each candidate's variant (``probes.what_if_model``) runs on the kept samples; its gain is its
   worst output SNR minus the Q/DQ model's on the same samples.
3. Its cost is the predicted engine's (``trt.predict``) difference: Reformat layers added and INT8
   MACs lost, from the variant's prediction against the Q/DQ model's.
4. The fallback list holds the nodes with a positive gain, largest first; its file format is one
   ONNX node name per line, lines starting with ``#`` are comments (``quantize --exclude-from``
   and ``fix`` read it).
5. The list's first 2, 4, 8... nodes (and all of them) are then run FP16 together, with their
   predicted cost. Gains do not add up: when the error comes from many layers alike (every
   depthwise conv of a MobileNet-style detector), each alone gains a fraction of a dB while
   together they gain many; the steps show how far the list must go.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx

from qdqkit.comparison.pairing import Pairing
from qdqkit.comparison.probes import fresh_copy, what_if_model
from qdqkit.comparison.result import CompareResult, FallbackStep, WhatIf
from qdqkit.comparison.stats import Error
from qdqkit.core.atomic import write_text_atomic
from qdqkit.core.errors import QdqkitError
from qdqkit.core.numerics import make_session, run
from qdqkit.core.progress import Progress

Kept = Sequence[tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray],
                      Mapping[str, np.ndarray]]]
MIN_GAIN_DB = 0.01


def _positions(pairing: Pairing) -> dict[str, int]:
    """Each quantized node's position in graph order (the same in every fresh copy)."""
    graph = pairing.nodes[0].node.graph if pairing.nodes else None
    if graph is None:
        return {}
    by_node = {n.node: n.name for n in pairing.nodes}
    return {by_node[n]: i for i, n in enumerate(graph) if n in by_node}


def _engine_totals(model: object, trt: str, shapes: Mapping[str, Sequence[int]] | None = None
                   ) -> tuple[object | None, int | None, int | None]:
    """The prediction of ``model`` (its own copy: ``shapes`` go into it), its Reformat count and
    INT8 MACs, at the data's input shapes when the model leaves some dimension symbolic."""
    from qdqkit.linting.latency import apply_shapes
    from qdqkit.trt.predict import run_prediction

    if shapes:
        apply_shapes(model, shapes)  # type: ignore[arg-type]
    try:
        prediction = run_prediction(model, trt=trt)  # type: ignore[arg-type]
    except QdqkitError:
        return None, None, None
    engine = prediction.engine
    macs = sum(layer.cost.macs for layer in engine.layers
               if layer.cost is not None and layer.cost.int8_compute and layer.cost.macs)
    return prediction, len(engine.reformats()), macs


def annotate_engine(result: CompareResult, qproto: onnx.ModelProto, pairing: Pairing,
                    trt: str, shapes: Mapping[str, Sequence[int]] | None = None
                    ) -> tuple[int | None, int | None]:
    """Each node row's predicted engine layer and its precision; returns the engine's totals."""
    model = fresh_copy(qproto, upcast=False)
    prediction, reformats, macs = _engine_totals(model, trt, shapes)
    if prediction is None:
        result.notes.append("the engine could not be predicted for this model; no precisions")
        return None, None
    nodes = list(model.graph)
    positions = _positions(pairing)
    for row in result.nodes:
        position = positions.get(row.name)
        if position is None:
            continue
        layer = prediction.layer_of(nodes[position])  # type: ignore[attr-defined]
        if layer is not None:
            row.engine_layer = layer.name
            row.engine_precision = str(layer.precision)
    return reformats, macs


def symbolic_input_shapes(qproto: onnx.ModelProto, feeds: Mapping[str, np.ndarray]
                          ) -> dict[str, list[int]] | None:
    """The shapes of ``feeds`` (one batch) when the model leaves an input dimension symbolic:
    the engine is predicted, and INT8 MACs counted, at the shapes the data has."""
    symbolic = any(not d.HasField("dim_value") for value in qproto.graph.input
                   for d in value.type.tensor_type.shape.dim)
    if not symbolic or not feeds:
        return None
    inputs = {value.name for value in qproto.graph.input}
    return {name: [int(d) for d in array.shape] for name, array in feeds.items()
            if name in inputs}


def _candidates(result: CompareResult, limit: int) -> list[str]:
    chosen: dict[str, None] = {}
    for pair in zip(result.layer_ranking + [""] * len(result.graph_ranking),
                    result.graph_ranking + [""] * len(result.layer_ranking), strict=False):
        for name in pair:
            if name and len(chosen) < limit:
                chosen.setdefault(name, None)
    if not chosen:  # neither view ran on anything: take the nodes in graph order
        chosen = dict.fromkeys(n.name for n in result.nodes[:limit])
    return list(chosen)


def _worst_snr(errors: dict[str, Error]) -> float:
    return min((e.metrics().snr_db for e in errors.values()), default=math.inf)


def evaluate_what_if(result: CompareResult, qproto: onnx.ModelProto, pairing: Pairing,
                     kept: Kept, *, fp16: bool, limit: int, trt: str,
                     progress: bool | None) -> None:
    """Fill ``what_if`` of the candidate rows and ``result.fallback`` (see the module doc)."""
    shapes = symbolic_input_shapes(qproto, kept[0][0] if kept else {})
    base_reformats, base_macs = annotate_engine(result, qproto, pairing, trt, shapes)
    base: dict[str, Error] = {}
    for _feeds, fouts, qouts in kept:
        for name in qouts:
            base.setdefault(name, Error()).add(fouts[name], qouts[name], name)
    base_snr = _worst_snr(base)
    samples = sum(int(next(iter(f.values())).shape[0]) if f else 1 for f, _o, _q in kept)
    positions = _positions(pairing)
    by_name = {n.name: n for n in pairing.nodes}
    candidates = [c for c in _candidates(result, limit) if c in positions]

    def fp16_nodes(names: Sequence[str]) -> dict[int, dict[int, np.ndarray]]:
        return {positions[name]: {w.input_index: w.original for w in by_name[name].weights
                                  if w.original is not None} for name in names}

    def measure(names: Sequence[str]) -> tuple[float, int | None, int | None]:
        """Worst output SNR with ``names`` FP16, predicted Reformats added and INT8 MACs lost."""
        session = make_session(what_if_model(qproto, fp16_nodes(names), upcast=fp16, fold=True))
        outputs = list(pairing.outputs)
        errors: dict[str, Error] = {}
        for feeds, fouts, _qouts in kept:
            values = run(session, feeds, outputs)
            for out in outputs:
                errors.setdefault(out, Error()).add(fouts[out], values[out], out)
        if base_reformats is None or base_macs is None:
            return _worst_snr(errors), None, None
        plain = what_if_model(qproto, fp16_nodes(names), upcast=False)
        _p, reformats, macs = _engine_totals(plain, trt, shapes)
        if reformats is None or macs is None:
            return _worst_snr(errors), None, None
        return _worst_snr(errors), reformats - base_reformats, base_macs - macs

    with Progress("what-if", total=len(candidates), enabled=progress) as bar:
        for name in candidates:
            snr, reformats_added, macs_lost = measure([name])
            result.node(name).what_if = WhatIf(
                output_snr_db=snr, snr_gain_db=_gain(snr, base_snr),
                reformats_added=reformats_added, int8_macs_lost=macs_lost, samples=samples)
            bar.advance()
    gains = [(row.what_if.snr_gain_db, row.name) for row in result.nodes
             if row.what_if is not None and row.what_if.snr_gain_db > MIN_GAIN_DB]
    result.fallback = [name for _gain_db, name in sorted(gains, key=lambda g: (-g[0], g[1]))]
    counts = step_sizes(len(result.fallback))
    with Progress("what-if together", total=len(counts), enabled=progress) as bar:
        for count in counts:
            snr, reformats_added, macs_lost = measure(result.fallback[:count])
            result.fallback_steps.append(FallbackStep(count, snr, _gain(snr, base_snr),
                                                      reformats_added, macs_lost))
            bar.advance()


def step_sizes(length: int) -> list[int]:
    """2, 4, 8... below ``length``, then ``length`` itself (rule 5); none for a list of one."""
    sizes = []
    size = 2
    while size < length:
        sizes.append(size)
        size *= 2
    return [*sizes, length] if length > 1 else []


def _gain(snr: float, base: float) -> float:
    if math.isinf(snr) and math.isinf(base):
        return 0.0
    if math.isinf(snr):
        return math.inf
    return snr - base


def fallback_text(result: CompareResult) -> str:
    """The ranked fallback list as a file (format in the module docstring)."""
    lines = [
        "# qdqkit compare: nodes to run in float (FP16), largest output gain first",
        f"# float {result.float_model} vs quantized {result.quant_model}; "
        f"{result.samples} samples ({result.data})",
        "# one ONNX node name per line; lines starting with # are comments",
        "# use: qdqkit quantize --exclude-from FILE, or qdqkit fix",
    ]
    for step in result.fallback_steps:
        lines.append(f"# the first {step.nodes} together: {step.snr_gain_db:+.2f} dB output SNR"
                     + _cost_text(step.reformats_added, step.int8_macs_lost))
    for name in result.fallback:
        what = result.node(name).what_if
        assert what is not None
        lines.append(f"# {what.snr_gain_db:+.2f} dB output SNR"
                     + _cost_text(what.reformats_added, what.int8_macs_lost))
        lines.append(name)
    return "\n".join(lines) + "\n"


def _cost_text(reformats_added: int | None, macs_lost: int | None) -> str:
    cost = []
    if reformats_added is not None:
        cost.append(f"{reformats_added:+d} Reformat layers")
    if macs_lost is not None:
        cost.append(f"{macs_lost:,} INT8 MACs lost")
    return f"; {', '.join(cost)}" if cost else ""


def write_fallback(result: CompareResult, path: str | Path,
                   protected: tuple[Path, ...] = ()) -> Path:
    return write_text_atomic(Path(path), fallback_text(result), protected)
