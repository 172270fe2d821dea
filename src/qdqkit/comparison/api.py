"""``compare(float, quant, data)``: where a Q/DQ model's error comes from, tensor by tensor.

One pass over the data (``core.data``), one batch in memory at a time:

1. the float model runs with every paired tensor exposed; the Q/DQ model runs end to end with its
   quantized tensors, its quantized nodes' outputs and its outputs exposed (graph-wise view);
2. the layer-wise model (``probes.local_model``) runs on the float model's tensors; each node is
   measured where its fused engine layer ends (``probes.fused_layer_ends``: after its
   BatchNormalization and activation), as TensorRT computes and writes it;
3. running sums (``stats``) fold each batch in; nothing of a batch is kept, except the outputs of
   the first ``what_if_samples`` samples, which the what-if pass (``whatif``) compares against.

fp16 models are upcast to fp32 first (``core.upcast``): the comparison then measures quantization,
not onnxruntime's fp16 kernels.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from qdqkit.comparison.pairing import (
    Pairing,
    QuantizedNode,
    computed_constants_stored,
    graph_sketch,
    pair_models,
    replay_equalization,
    replay_smoothing,
)
from qdqkit.comparison.probes import fresh_copy, fused_layer_ends, local_model
from qdqkit.comparison.result import (
    CompareResult,
    Histogram,
    NodeRow,
    OutputRow,
    TensorRow,
    WeightError,
)
from qdqkit.comparison.stats import Agreement, Error, Quantization
from qdqkit.core.activations import ActivationRunner
from qdqkit.core.data import CalibrationData, DataRequest, DataSource, open_data
from qdqkit.core.errors import QdqkitError
from qdqkit.core.numerics import make_session, run
from qdqkit.core.observers import TensorObserver
from qdqkit.core.progress import Progress
from qdqkit.core.qdq import dtype_label
from qdqkit.trt.build_record import resolve_build

Metric = Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray]], float]
VIEWS = ("graph", "layer")
HISTOGRAM_BINS = 64
WHAT_IF_SAMPLES = 16
WHAT_IF_NODES = 24


def compare(
    float_model: str | os.PathLike[str],
    quant_model: str | os.PathLike[str],
    data: DataSource | DataRequest | None = None,
    *,
    samples: int | None = None,
    batch: int | None = None,
    seed: int = 0,
    views: Iterable[str] = VIEWS,
    what_if: int = WHAT_IF_NODES,
    what_if_samples: int = WHAT_IF_SAMPLES,
    metric: Metric | None = None,
    class_axis: int = -1,
    top_k: int = 5,
    trt: str | None = None,
    progress: bool | None = None,
) -> CompareResult:
    """Compare ``quant_model`` with the ``float_model`` it was made from on ``data``.

    ``data`` is any ``core.data`` source (None: seeded random inputs shaped and ranged from the
    model, which the result says). ``views`` picks graph-wise and/or layer-wise error; ``what_if``
    is how many nodes (the worst in either view) get the FP16 what-if, 0 for none. ``metric`` is
    the user's own measure, called per batch as ``metric(float_outputs, quant_outputs)`` and
    averaged over samples. ``trt`` is the TensorRT version the engine costs are predicted for;
    None: the one ``quantize`` recorded in ``quant_model``, else 8.6 (``trt.build_record``).
    """
    chosen = [v for v in dict.fromkeys(views)]
    unknown = [v for v in chosen if v not in VIEWS]
    if unknown or not chosen:
        raise QdqkitError(f"unknown view {', '.join(unknown) or '(none)'}: use graph and/or layer")
    fpath, qpath = Path(float_model), Path(quant_model)
    fproto, qproto = _load(fpath), _load(qpath)
    fp16 = _has_fp16(fproto) or _has_fp16(qproto)
    fmodel, qmodel = fresh_copy(fproto, upcast=fp16), fresh_copy(qproto, upcast=fp16)
    computed_constants_stored(fmodel)
    replay_equalization(qmodel, fmodel)
    replay_smoothing(qmodel, fmodel)
    pairing = pair_models(qmodel, fmodel, str(qpath), str(fpath))
    trt, _, from_model = resolve_build(qmodel, trt, "gpu")
    if isinstance(data, DataRequest):
        stream = data.open(qproto)
    else:
        stream = open_data("random" if data is None else data, qproto, batch=batch,
                           limit=samples, seed=seed)
    session = _Sessions(fmodel, qmodel, qproto, pairing, chosen, fp16)
    acc = _Accumulators(pairing, class_axis, top_k, session.local_points)
    kept: list[tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]] = []
    kept_samples = metric_total = 0
    metric_sum = 0.0
    seen = 0
    first: dict[str, np.ndarray] = {}
    with (Progress("comparing", total=stream.total_samples, enabled=progress) as bar,
          stream.explaining_guesses()):
        for feeds in stream:
            first = first or dict(feeds)
            count = _count(feeds)
            fvals, qvals, lvals = session.run(feeds)
            acc.add(fvals, qvals, lvals)
            fouts = {q: fvals[f] for q, f in pairing.outputs.items()}
            qouts = {q: qvals[q] for q in pairing.outputs}
            if metric is not None:
                metric_sum += float(metric(fouts, qouts)) * count
                metric_total += count
            if what_if and kept_samples < what_if_samples:
                kept.append((dict(feeds), fouts, qouts))
                kept_samples += count
            seen += count
            bar.advance(count)
    if seen == 0:
        raise QdqkitError(f"{stream.description}: gave no samples; the comparison needs data")
    result = _result(fpath, qpath, stream, seen, fp16, chosen, pairing, acc, trt)
    result.from_model = from_model
    result.graph = graph_sketch(qmodel.graph)
    if metric is not None and metric_total:
        result.user_metric = metric_sum / metric_total
    if what_if and kept:
        from qdqkit.comparison.whatif import evaluate_what_if

        evaluate_what_if(result, qproto, pairing, kept, fp16=fp16, limit=what_if, trt=trt,
                         progress=progress)
    else:
        _annotate_engine(result, qproto, pairing, trt, first)
    return result


def _load(path: Path) -> onnx.ModelProto:
    try:
        return onnx.load(path)
    except Exception:
        from qdqkit.core.model_io import load_model

        load_model(path)  # raises the one-line error saying what is wrong with the file
        raise


def _has_fp16(proto: onnx.ModelProto) -> bool:
    f16 = onnx.TensorProto.FLOAT16
    return any(i.data_type == f16 for i in proto.graph.initializer) or any(
        v.type.tensor_type.elem_type == f16 for v in (*proto.graph.input, *proto.graph.output))


def _count(feeds: Mapping[str, np.ndarray]) -> int:
    first = next(iter(feeds.values()), None)
    return int(first.shape[0]) if first is not None and first.ndim else 1


class _Sessions:
    """The float, Q/DQ and layer-wise runs of one batch, with the tensors each view needs."""

    def __init__(self, fmodel: ir.Model, qmodel: ir.Model, qproto: onnx.ModelProto,
                 pairing: Pairing, views: list[str], fp16: bool) -> None:
        self.pairing = pairing
        self.input_map = pairing.inputs
        finputs = set(pairing.inputs.values())
        wanted_float = {s.float_name for s in pairing.sites.values() if s.float_name}
        wanted_float |= {n.float_output for n in pairing.nodes if n.float_output}
        wanted_float |= set(pairing.outputs.values())
        wanted_float |= {pairing.value_pairs[v.name] for n in pairing.nodes
                         for v in _computed_inputs(n) if v.name in pairing.value_pairs}
        self.local = None
        # Per node: where the layer-wise view measures it, in the Q/DQ and the float model.
        self.local_points: dict[str, tuple[str, str]] = {}
        if "layer" in views:
            by_node = {n.node: n for n in pairing.nodes if n.float_output}
            ends = fused_layer_ends(qmodel, pairing.value_pairs)
            positions: dict[int, str] = {}
            for i, n in enumerate(qmodel.graph):
                if n in by_node:
                    paired = by_node[n]
                    point = ends.get(n, (paired.output, paired.float_output or ""))
                    positions[i] = point[0]
                    self.local_points[paired.name] = point
            self.local = local_model(qproto, positions, pairing.value_pairs,
                                     {s.name: s.float_name for s in pairing.sites.values()
                                      if s.float_name}, upcast=fp16)
            if self.local is not None:
                wanted_float |= set(self.local.feeds.values())
                wanted_float |= {f for q, f in self.local_points.values()
                                 if q in self.local.outputs}
        def folded() -> onnx.ModelProto:
            # Weights dequantized once: the same values, without the per-run Q/DQ of every weight.
            return ir.serde.serialize_model(fresh_copy(qproto, upcast=fp16, fold_weights=True))

        self.float_runner = ActivationRunner(
            ir.serde.serialize_model(fmodel), sorted(wanted_float - finputs))
        self.float_inputs = finputs & wanted_float
        self.quant_runner = None
        if "graph" in views:
            wanted_quant = set(pairing.outputs)
            for site in pairing.sites.values():
                if site.float_name and site.dequantized:
                    wanted_quant.add(site.dequantized[0].name or "")
                    wanted_quant.add(site.name)
            wanted_quant |= {n.output for n in pairing.nodes if n.float_output}
            wanted_quant |= {i.name or "" for n in pairing.nodes for i in _computed_inputs(n)}
            qinputs = set(pairing.inputs)
            self.quant_inputs = qinputs & wanted_quant
            self.quant_runner = ActivationRunner(folded(), sorted(wanted_quant - qinputs))
        else:
            outputs = set(pairing.outputs)
            self.quant_inputs = set(pairing.inputs) & outputs
            self.quant_runner = ActivationRunner(folded(), sorted(outputs - set(pairing.inputs)))
        self.local_session = make_session(self.local.model) if self.local is not None else None

    def run(self, feeds: Mapping[str, np.ndarray]) -> tuple[
            dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
        ffeeds = {self.input_map[name]: array for name, array in feeds.items()}
        fvals = next(self.float_runner.run([ffeeds]))
        fvals.update((n, ffeeds[n]) for n in self.float_inputs)
        qvals = next(self.quant_runner.run([feeds])) if self.quant_runner else {}
        qvals.update((n, feeds[n]) for n in self.quant_inputs)
        lvals: dict[str, np.ndarray] = {}
        if self.local_session is not None and self.local is not None:
            local_feeds = {k: fvals[v] for k, v in self.local.feeds.items()}
            local_feeds.update((n, feeds[n]) for n in self.local.graph_inputs)
            lvals = run(self.local_session, local_feeds, list(self.local.outputs))
        return fvals, qvals, lvals


def _computed_inputs(node: QuantizedNode) -> list[ir.Value]:
    """Inputs of a quantized node that are neither Q/DQ outputs nor constants."""
    from qdqkit.core.qdq import is_dequantize

    found = []
    for value in node.node.inputs:
        if value is None or value.const_value is not None or not value.name:
            continue
        producer = value.producer()
        if producer is not None and (is_dequantize(producer) or producer.op_type == "Constant"):
            continue
        if value.is_initializer():
            continue
        found.append(value)
    return found


class _Accumulators:
    def __init__(self, pairing: Pairing, class_axis: int, top_k: int,
                 local_points: Mapping[str, tuple[str, str]]) -> None:
        self.pairing = pairing
        self.local_points = local_points
        self.errors: dict[str, Error] = {}  # quant tensor -> error vs its float pair
        self.site_graph: dict[str, Error] = {}  # DQ output vs float tensor
        self.site_local: dict[str, Error] = {}  # DQ(Q(float)) vs float tensor
        self.quantizers = {n: Quantization(s.params) for n, s in pairing.sites.items()
                           if s.float_name}
        self.observers = {n: TensorObserver(n) for n in self.quantizers}
        self.node_local: dict[str, Error] = {}
        self.agreement = {q: Agreement(class_axis, top_k) for q in pairing.outputs}

    def _err(self, table: dict[str, Error], key: str) -> Error:
        found = table.get(key)
        if found is None:
            found = table[key] = Error()
        return found

    def add(self, fvals: dict[str, np.ndarray], qvals: dict[str, np.ndarray],
            lvals: dict[str, np.ndarray]) -> None:
        pairing = self.pairing
        for name, site in pairing.sites.items():
            if site.float_name is None:
                continue
            reference = fvals[site.float_name]
            self.observers[name].update(reference)
            fake = self.quantizers[name].fake_quantize(reference)
            self._err(self.site_local, name).add(reference, fake, name)
            if qvals and site.dequantized and site.dequantized[0].name in qvals:
                self._err(self.site_graph, name).add(
                    reference, qvals[site.dequantized[0].name], name)
                self._err(self.errors, name).add(reference, qvals[name], name)
        for node in pairing.nodes:
            if node.float_output is None:
                continue
            reference = fvals[node.float_output]
            if node.output in qvals:
                self._err(self.errors, node.output).add(reference, qvals[node.output], node.name)
                for value in _computed_inputs(node):
                    paired = pairing.value_pairs.get(value.name or "")
                    if paired in fvals and value.name in qvals:
                        self._err(self.errors, f"in:{value.name}").add(
                            fvals[paired], qvals[value.name], value.name)
            local_output, float_end = self.local_points.get(
                node.name, (node.output, node.float_output))
            if local_output in lvals and float_end in fvals:
                self._err(self.node_local, node.name).add(fvals[float_end], lvals[local_output],
                                                          node.name)
        for qname, fname in pairing.outputs.items():
            if qname in qvals:
                self._err(self.errors, "out:" + qname).add(fvals[fname], qvals[qname], qname)
                self.agreement[qname].add(fvals[fname], qvals[qname])


def _metrics(error: Error | None) -> Any:
    return error.metrics() if error is not None and error.seen else None


def _result(fpath: Path, qpath: Path, stream: CalibrationData, seen: int, fp16: bool,
            views: list[str], pairing: Pairing, acc: _Accumulators, trt: str) -> CompareResult:
    tensors = [_tensor_row(name, pairing, acc) for name in pairing.sites]
    nodes = [_node_row(node, acc) for node in pairing.nodes]
    outputs = []
    for qname, fname in pairing.outputs.items():
        error = acc.errors.get("out:" + qname)
        if error is None:
            continue
        agreement = acc.agreement[qname]
        outputs.append(OutputRow(qname, fname, error.metrics(), agreement.argmax(),
                                 agreement.topk(), agreement.effective_k))
    worst = min((o.error.snr_db for o in outputs), default=None)
    graph_rank = sorted((n for n in nodes if n.added_snr_db is not None),
                        key=lambda n: (_finite(n.added_snr_db), n.name))
    layer_rank = sorted((n for n in nodes if n.local is not None),
                        key=lambda n: (_finite(n.local.snr_db if n.local else None), n.name))
    notes = []
    if stream.is_random:
        notes.append("no data given: the inputs are seeded random values shaped and ranged from "
                     "the model, so the figures show where error arises, not the model's accuracy")
    if pairing.unpaired:
        notes.append(f"{len(pairing.unpaired)} of {len(pairing.nodes)} quantized nodes have no "
                     "float counterpart (no tensor of the same name and shape, nor of the same "
                     "structure) and are not measured: " + ", ".join(pairing.unpaired[:8]))
    if fp16:
        notes.append("fp16 models were run upcast to fp32, so the figures measure quantization, "
                     "not fp16 arithmetic")
    return CompareResult(
        float_model=str(fpath), quant_model=str(qpath), data=stream.description,
        random_data=stream.is_random, samples=seen, fp16_upcast=fp16, views=views,
        outputs=outputs, output_snr_db=worst, user_metric=None, nodes=nodes, tensors=tensors,
        graph_ranking=[n.name for n in graph_rank], layer_ranking=[n.name for n in layer_rank],
        fallback=[], unpaired=pairing.unpaired, trt=trt, notes=notes,
    )


def _added_snr(arrival_db: float, output_db: float) -> float:
    """SNR of the noise this node adds: output noise power minus arriving noise power.

    Relative noise powers (10^(-SNR/10)) add, so what a node adds is their difference; a node
    that only passes error on (or shrinks it) adds none (infinite SNR).
    """
    added = 10.0 ** (-output_db / 10.0) - 10.0 ** (-arrival_db / 10.0)
    return math.inf if added <= 0.0 else -10.0 * math.log10(added)


def _finite(value: float | None) -> float:
    if value is None or math.isnan(value):
        return math.inf
    return value


def _tensor_row(name: str, pairing: Pairing, acc: _Accumulators) -> TensorRow:
    site = pairing.sites[name]
    params = site.params
    scale: float | list[float] = (params.scalar_scale if not params.per_channel
                                  else [float(s) for s in params.scale.reshape(-1)])
    zero: int | list[int] | None = None
    if params.zero_point is not None:
        zeros = [int(z) for z in np.asarray(params.zero_point).reshape(-1)]
        zero = zeros[0] if len(zeros) == 1 else zeros
    quant = acc.quantizers.get(name)
    observer = acc.observers.get(name)
    histogram = None
    if quant is not None and observer is not None:
        histogram = _histogram(observer, max(abs(v) for v in quant.clip_range))
    return TensorRow(
        name=name, float_name=site.float_name, scale=scale, zero_point=zero,
        quant_type=dtype_label(params.quant_dtype), graph=_metrics(acc.site_graph.get(name)),
        local=_metrics(acc.site_local.get(name)),
        clipped_fraction=quant.clipped_fraction if quant else None,
        saturated_fraction=quant.saturated_fraction if quant else None, histogram=histogram,
    )


def _histogram(observer: TensorObserver, clip: float) -> Histogram:
    """The observer's 2048 |x| bins folded into ``HISTOGRAM_BINS`` equal ones."""
    counts = observer.histogram
    if counts is None or observer.range_exponent is None:
        return Histogram(0.0, [int(observer.count)] + [0] * (HISTOGRAM_BINS - 1), clip,
                         observer.absmax)
    group = counts.size // HISTOGRAM_BINS
    folded = counts.reshape(HISTOGRAM_BINS, group).sum(axis=1)
    # Show the occupied part only: drop empty bins above the largest |x| (in powers of two).
    top = int(np.flatnonzero(folded)[-1]) + 1 if folded.any() else 1
    while top <= HISTOGRAM_BINS // 2 and group > 1:
        group //= 2
        folded = counts.reshape(-1, group).sum(axis=1)[:HISTOGRAM_BINS]
        top = int(np.flatnonzero(folded)[-1]) + 1
    return Histogram(observer.bin_width * group, [int(c) for c in folded], clip,
                     observer.absmax)


def _node_row(node: QuantizedNode, acc: _Accumulators) -> NodeRow:
    graph = _metrics(acc.errors.get(node.output))
    arrivals = [acc.errors[s].metrics().snr_db for s in node.activation_sites
                if s in acc.errors and acc.errors[s].seen]
    arrivals += [acc.errors[f"in:{v.name}"].metrics().snr_db for v in _computed_inputs(node)
                 if f"in:{v.name}" in acc.errors]
    arrival = min(arrivals) if arrivals else (math.inf if graph is not None else None)
    drop = added = None
    if graph is not None and arrival is not None:
        drop = 0.0 if arrival == graph.snr_db else arrival - graph.snr_db
        added = _added_snr(arrival, graph.snr_db)
    return NodeRow(
        name=node.name, op_type=node.op_type, output=node.output,
        float_output=node.float_output, quantized_inputs=list(node.activation_sites),
        graph=graph, local=_metrics(acc.node_local.get(node.name)), arrival_snr_db=arrival,
        snr_drop_db=drop, added_snr_db=added, weights=[_weight_error(w) for w in node.weights
                                   if w.original is not None],
    )


def _weight_error(weight: Any) -> WeightError:
    """Overall and per-output-channel SNR of the dequantized weight against the float one."""
    # A scalar constant (a Mul by 0.1 quantized for DLA) is one channel of one value.
    original = np.atleast_1d(np.asarray(weight.original, np.float32))
    test = np.atleast_1d(np.asarray(weight.dequantized, np.float32))
    axis = (weight.channel_axis if weight.channel_axis is not None else 0) % original.ndim
    ref = np.moveaxis(original, axis, 0).reshape(original.shape[axis], -1)
    noise = np.square(ref - np.moveaxis(test, axis, 0).reshape(ref.shape)).sum(
        axis=1, dtype=np.float64)
    signal = np.square(ref).sum(axis=1, dtype=np.float64)
    channel = [_snr(float(s), float(n)) for s, n in zip(signal, noise, strict=True)]
    worst = int(np.argmin(channel)) if channel else None
    return WeightError(weight.input_index, _snr(float(signal.sum()), float(noise.sum())),
                       channel[worst] if worst is not None else None, worst, channel)


def _snr(signal: float, noise: float) -> float:
    if noise == 0.0:
        return math.inf
    return -math.inf if signal == 0.0 else 10.0 * math.log10(signal / noise)


def _annotate_engine(result: CompareResult, qproto: onnx.ModelProto, pairing: Pairing,
                     trt: str, feeds: Mapping[str, np.ndarray]) -> None:
    from qdqkit.comparison.whatif import annotate_engine, symbolic_input_shapes

    annotate_engine(result, qproto, pairing, trt, symbolic_input_shapes(qproto, feeds))


def run_exposed(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray],
                tensors: list[str]) -> dict[str, np.ndarray]:
    """Plain onnxruntime run of ``model`` with ``tensors`` exposed (for checks and tests)."""
    return next(ActivationRunner(model, tensors).run([feeds]))
