"""``auto`` calibration: each scale group's method chosen by the network's output error.

The least quantization error per tensor is not the least error at the output. Clipping a
tensor's largest values can cost the output far more than its share of the tensor's error: on
PP-OCRv6's recognizer, one stem tensor clipped at its least-MSE point (0.73 of its max) takes
the output from 19.4 to 15.7 dB, and every tensor at its least-MSE point gives 14.7 dB against
17.1 dB for plain max; on the PicoDet layout detector clipping is what keeps boxes at all. The
error a tensor adds at its readers' outputs does not tell them apart either. So ``auto``
measures the output:

1. Candidates per group: ``max``, ``percentile`` and ``mse``-or-better, the per-tensor pick of
   ``core.calibration`` (the least expected error of its methods).
2. Evaluation samples: the 8 calibration samples with the smallest content digest (batches
   split into samples where the batch axis is dynamic), kept while calibrating. The choice,
   like the scales, depends on neither the batch size nor the order of the data.
3. One session of the model with every planned Q/DQ and quantized weights, the activation
   scales fed as inputs: trying a configuration is a run, not a new session. Each network
   output is judged against the float model on the same samples: by squared error, or, behind
   a Softmax or Sigmoid, by the KL divergence of its probabilities, and an output a Concat
   writes part by part (``_expose_judged``). A
   configuration's error is the mean over outputs of each one's error relative to the per-tensor
   picks', so outputs in different units weigh alike.
4. The per-tensor picks start, unless every group at ``max`` or at ``percentile`` does better;
   then runs of consecutive groups (graph order: the whole list, halves, quarters...) switch
   between ``max`` and the per-tensor pick while that lowers the error, within a fixed number of
   runs. A change is kept only when it lowers the error by 0.5 dB or more, so the noise of a few
   samples does not steer the choice. A run that switches nothing is never made.
5. The evaluation samples of a configuration run two at a time, each on half the cores: the
   search is ~120 runs, and independent runs keep every core busy where one run's threads wait
   for each other at every operator (on two cores and a ResNet-50, a median 7.7 s instead of
   8.5 s over five interleaved runs, and 13.7 s instead of 19-22 s while other work ran). The
   sums are taken in sample order, so the errors do not change.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import onnx_ir as ir

from qdqkit.core.model_inputs import ModelInput
from qdqkit.core.numerics import available_cores, make_session, run
from qdqkit.core.qdq import is_dequantize, is_quantize
from qdqkit.core.upcast import upcast_float16
from qdqkit.passes.insert_qdq import ActivationQdq, InsertQdq, WeightQdq
from qdqkit.quantization.calibrate import Calibrated
from qdqkit.trt.placement import Placement

SAMPLES = 8  # evaluation samples
SEARCH_RUNS = 12  # configurations tried after the uniform ones
# A configuration replaces the best one only when its error is this much lower (0.5 dB): a few
# samples must not steer the choice by their noise.
MARGIN = 10 ** -0.05
LOCAL = "auto"  # the per-tensor pick of ``core.calibration``
UNIFORM = ("max", "percentile", LOCAL)


class SampleKeeper:
    """The ``count`` calibration samples with the smallest content digest (rule 2)."""

    def __init__(self, inputs: Sequence[ModelInput], count: int = SAMPLES) -> None:
        self.count = count
        self._split = all(i.dims is not None and len(i.dims) > 0 and i.dims[0] is None
                          for i in inputs)
        self._heap: list[tuple[bytes, int, dict[str, np.ndarray]]] = []
        self._seen = 0

    def offer(self, feeds: Mapping[str, np.ndarray]) -> None:
        arrays = {name: np.asarray(value) for name, value in feeds.items()}
        sizes = {a.shape[0] if a.ndim else -1 for a in arrays.values()}
        units: list[dict[str, np.ndarray]] = [arrays]
        if self._split and len(sizes) == 1 and (size := next(iter(sizes))) > 1:
            units = [{k: a[i:i + 1] for k, a in arrays.items()} for i in range(size)]
        for unit in units:
            digest = hashlib.blake2b(digest_size=16)
            for name in sorted(unit):
                array = np.ascontiguousarray(unit[name])
                digest.update(name.encode())
                digest.update(str(array.dtype).encode() + str(array.shape).encode())
                digest.update(array.tobytes())
            # Negated so the heap's top is the largest digest kept: the one to drop next.
            key = bytes(255 - b for b in digest.digest())
            self._seen += 1
            entry = (key, -self._seen, {k: np.array(a) for k, a in unit.items()})
            if len(self._heap) < self.count:
                heapq.heappush(self._heap, entry)
            elif key > self._heap[0][0]:
                heapq.heapreplace(self._heap, entry)

    def samples(self) -> list[dict[str, np.ndarray]]:
        """The kept samples, smallest digest first."""
        return [unit for _, _, unit in sorted(self._heap, key=lambda e: e[0], reverse=True)]


@dataclass
class OutputChoice:
    """The method per group and the output error of each configuration tried."""

    methods: dict[str, str]
    # Configuration -> output error relative to the per-tensor picks': "least-error" (those, so
    # 1.0), "max", "percentile" (every group at that method) and "chosen".
    errors: dict[str, float] = field(default_factory=dict)
    runs: int = 0
    # Per judged tensor, its SNR against the float model under the chosen methods (dB; None
    # where the float tensor is all zeros): how close the chosen model is, not just how much
    # closer than the other configurations.
    snr_db: dict[str, float | None] = field(default_factory=dict)


def choose_by_output(
    planned: ir.Model, placement: Placement, calibrated: Calibrated,
    samples: Sequence[Mapping[str, np.ndarray]], *, per_tensor_weights: bool = False,
    search_runs: int = SEARCH_RUNS,
) -> OutputChoice:
    """Rules 3 and 4 of the module docstring: the method per calibrated group."""
    groups = [g for g in dict.fromkeys(p.group for p in placement.points)
              if g in calibrated.observers]
    if not groups or not samples:
        return OutputChoice({})
    amaxes = {g: calibrated.candidates(g, UNIFORM) for g in groups}
    with ThreadPoolExecutor(max_workers=_PARALLEL_RUNS,
                            thread_name_prefix="qdqkit-by-output") as pool:
        evaluator = _Evaluator(planned, placement, groups, samples, per_tensor_weights, pool)
        return _search(groups, amaxes, evaluator, search_runs)


_PARALLEL_RUNS = 2  # rule 5


def _search(groups: Sequence[str], amaxes: Mapping[str, Mapping[str, float]],
            evaluator: _Evaluator, search_runs: int) -> OutputChoice:
    """Rule 4 over ``evaluator``'s configurations."""

    baseline: list[np.ndarray] = []

    def error(methods: Mapping[str, str]) -> float:
        """The mean over judged outputs of each one's error relative to the per-tensor picks'
        (the first configuration measured): outputs judged in other units weigh alike."""
        per_output = evaluator.errors({g: amaxes[g][methods[g]] for g in groups})
        if not baseline:
            baseline.append(np.maximum(per_output, 1e-30))
        return float(np.mean(per_output / baseline[0]))

    choice = OutputChoice({})
    best_methods = {g: LOCAL for g in groups}
    best = error(best_methods)
    choice.errors["least-error"] = best
    choice.runs += 1
    for method in ("max", "percentile"):
        methods = {g: method for g in groups}
        value = error(methods)
        choice.errors[method] = value
        choice.runs += 1
        if value < best * MARGIN:
            best, best_methods = value, methods
    # Rule 4: switch runs of groups between max and the per-tensor pick, coarse to fine.
    other = {g: ("max" if best_methods[g] != "max" else LOCAL) for g in groups}
    differs = [g for g in groups if amaxes[g][other[g]] != amaxes[g][best_methods[g]]]
    # Coarse to fine. Every level is worth its runs: on the PP-OCRv6 recognizer no switch of
    # the whole list or of a half pays, while smaller runs take the error 11 dB lower.
    runs: list[list[str]] = [differs] if differs else []
    tried = 0
    while runs and tried < search_runs:
        block = runs.pop(0)
        trial = dict(best_methods)
        for g in block:
            trial[g] = other[g]
        value = error(trial)
        tried += 1
        choice.runs += 1
        if value < best * MARGIN:
            best, best_methods = value, trial
            for g in block:
                other[g] = "max" if trial[g] != "max" else LOCAL
        elif len(block) > 1:
            half = len(block) // 2
            runs += [block[:half], block[half:]]
    choice.errors["chosen"] = best
    choice.methods = best_methods
    choice.snr_db = evaluator.snr_db({g: amaxes[g][best_methods[g]] for g in groups})
    return choice


class _Evaluator:
    """The quantized model with activation scales as inputs, and the float outputs to match."""

    def __init__(self, planned: ir.Model, placement: Placement, groups: Sequence[str],
                 samples: Sequence[Mapping[str, np.ndarray]], per_tensor_weights: bool,
                 pool: ThreadPoolExecutor) -> None:
        self.samples = list(samples)
        self.pool = pool
        self._snr: dict[tuple[tuple[str, float], ...], dict[str, float | None]] = {}
        float_model = planned.clone()
        upcast_float16(float_model)  # onnxruntime's float optimizations are for float32 graphs
        self.judged = _expose_judged(float_model)
        self.outputs = [j.name for j in self.judged]
        reference = make_session(float_model, optimize=True)
        self.reference = [run(reference, s, self.outputs) for s in self.samples]
        self.inputs = {g: f"qdqkit_scale_{i}" for i, g in enumerate(groups)}
        # Rule 5: runs at once on half the cores each, when there are cores and runs to share.
        at_once = len(self.samples) > 1 and available_cores() >= _PARALLEL_RUNS
        self.session = make_session(self._model(planned, placement, per_tensor_weights),
                                    optimize=True, spin=not at_once,
                                    threads=max(1, available_cores() // _PARALLEL_RUNS)
                                    if at_once else 0)

    def _model(self, planned: ir.Model, placement: Placement,
               per_tensor_weights: bool) -> ir.Model:
        model = planned.clone()  # the placement's nodes are ``planned``'s: map them by position
        same = dict(zip(planned.graph, model.graph, strict=True))
        values = {v: c for n, m in same.items() for v, c in zip(n.outputs, m.outputs, strict=True)}
        values.update(zip(planned.graph.inputs, model.graph.inputs, strict=True))
        points = [p for p in placement.points if p.group in self.inputs and p.value in values]
        InsertQdq(
            [ActivationQdq(values[p.value], 1.0, None if p.readers is None
                           else tuple(same[r] for r in p.readers)) for p in points],
            [WeightQdq(same[n], per_tensor=per_tensor_weights)
             for n in placement.quantized_weighted],
        )(model)
        upcast_float16(model)
        _expose(model, self.outputs)  # by name: a quantized network output's DQ took its name
        group_of = {values[p.value]: p.group for p in points}
        scale_inputs: dict[str, ir.Value] = {}
        for group, name in self.inputs.items():
            value = ir.Value(name=name, type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([]))
            model.graph.inputs.append(value)
            scale_inputs[group] = value
        for node in list(model.graph):
            if not is_quantize(node):
                continue
            source = node.inputs[0]
            producer = source.producer() if source is not None else None
            if producer is not None and producer.op_type == "Cast" and producer.inputs:
                source = producer.inputs[0]  # rule 1 of InsertQdq: a cast around the pair
            owner = group_of.get(source) if source is not None else None
            if owner is None:
                continue
            node.replace_input_with(1, scale_inputs[owner])
            for use in list(node.outputs[0].uses()):
                if is_dequantize(use.node):
                    use.node.replace_input_with(1, scale_inputs[owner])
        return model

    def errors(self, amaxes: Mapping[str, float]) -> np.ndarray:
        """Per judged output, its error on the samples (rule 3); its SNR is kept too, keyed by
        the configuration's scales (``snr_db``)."""
        scales = {self.inputs[g]: np.array(a / 127.0 if a > 0 else 1.0, np.float32)
                  for g, a in amaxes.items()}
        totals = np.zeros(len(self.judged))
        signal, noise = np.zeros(len(self.judged)), np.zeros(len(self.judged))
        runs = self.pool.map(lambda sample: run(self.session, {**sample, **scales}, self.outputs),
                             self.samples)
        for want, got in zip(self.reference, runs, strict=True):
            for i, judged in enumerate(self.judged):
                totals[i] += judged.error(want[judged.name], got[judged.name])
                power, error = _energies(want[judged.name], got[judged.name])
                signal[i] += power
                noise[i] += error
        self._snr[_key(amaxes)] = {
            j.name: (None if signal[i] <= 0 else float("inf") if noise[i] <= 0
                     else float(10.0 * np.log10(signal[i] / noise[i])))
            for i, j in enumerate(self.judged)}
        return totals

    def snr_db(self, amaxes: Mapping[str, float]) -> dict[str, float | None]:
        """Per judged tensor, its SNR under ``amaxes`` (a configuration ``errors`` ran)."""
        return self._snr.get(_key(amaxes), {})


def written_output_snr(float_model: ir.Model, written: ir.Model,
                       samples: Sequence[Mapping[str, np.ndarray]]) -> dict[str, float | None]:
    """Per judged tensor (rule 3's), the SNR of the model as written against ``float_model`` on
    ``samples``, both run upcast to float32 as the search runs them. The search measures its
    placement; when ``quantization.settle`` then keeps some of it float, only a run of the
    written model tells how close that one is (a BERT encoder whose every INT8 region was judged
    unpaid still showed the 20 dB of the all-INT8 placement)."""
    reference = float_model.clone()
    upcast_float16(reference)
    judged = _expose_judged(reference)
    names = [j.name for j in judged]
    model = written.clone()
    upcast_float16(model)
    _expose(model, names)
    want_session = make_session(reference, optimize=True)
    got_session = make_session(model, optimize=True)
    signal, noise = np.zeros(len(names)), np.zeros(len(names))
    for sample in samples:
        want = run(want_session, sample, names)
        got = run(got_session, sample, names)
        for i, name in enumerate(names):
            power, error = _energies(want[name], got[name])
            signal[i] += power
            noise[i] += error
    return {name: (None if signal[i] <= 0 else float("inf") if noise[i] <= 0
                   else float(10.0 * np.log10(signal[i] / noise[i])))
            for i, name in enumerate(names)}


def _key(amaxes: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
    return tuple(sorted(amaxes.items()))


def _energies(want: object, got: object) -> tuple[float, float]:
    """The float tensor's energy and the squared error of the quantized one (0, 0 for a
    non-numeric output)."""
    if not (isinstance(want, np.ndarray) and isinstance(got, np.ndarray)) or not (
            np.issubdtype(want.dtype, np.number) or want.dtype == np.bool_):
        return 0.0, 0.0
    a, b = _aligned(want.astype(np.float64), np.nan_to_num(got.astype(np.float64), nan=1e30))
    return float(np.sum(a * a)), float(np.sum((a - b) ** 2))


def _aligned(want: np.ndarray, got: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``want`` and ``got`` zero-padded to one shape. An output whose length depends on the
    values (a decoder's Loop that stops at an end token) can come out longer or shorter once
    quantized: the steps only one side has count as error in full."""
    if want.shape == got.shape:
        return want, got
    if want.ndim != got.ndim:
        want, got = want.reshape(-1), got.reshape(-1)
    shape = tuple(max(x, y) for x, y in zip(want.shape, got.shape, strict=True))

    def padded(array: np.ndarray) -> np.ndarray:
        return np.pad(array, [(0, n - d) for n, d in zip(shape, array.shape, strict=True)])

    return padded(want), padded(got)


@dataclass(frozen=True)
class _Judged:
    """A tensor the error is measured on, and how (rule 3)."""

    name: str
    kind: str  # "energy", "softmax" (its probabilities, over ``axis``) or "sigmoid"
    axis: int = -1

    def error(self, want: object, got: object) -> float:
        if not (isinstance(want, np.ndarray) and isinstance(got, np.ndarray)) or not (
                np.issubdtype(want.dtype, np.number) or want.dtype == np.bool_):
            return 0.0  # a sequence, map or string output: nothing to weigh
        a, b = _aligned(want.astype(np.float64), np.nan_to_num(got.astype(np.float64), nan=1e30))
        if self.kind == "softmax":  # KL(float || quantized) of the probabilities
            log_p, log_q = _log_softmax(a, self.axis), _log_softmax(b, self.axis)
            return float(np.sum(np.exp(log_p) * (log_p - log_q)))
        if self.kind == "sigmoid":  # the same, per element, for two-way probabilities
            log_p, log_q = -np.logaddexp(0.0, -a), -np.logaddexp(0.0, -b)
            log_1p, log_1q = -np.logaddexp(0.0, a), -np.logaddexp(0.0, b)
            return float(np.sum(np.exp(log_p) * (log_p - log_q)
                                + np.exp(log_1p) * (log_1p - log_1q)))
        return float(np.sum((a - b) ** 2))


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


_COPIES = frozenset({"Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Identity"})


def _expose_judged(model: ir.Model) -> list[_Judged]:
    """The tensors the error is measured on, made graph outputs (rule 3). A network output made
    by Softmax, LogSoftmax or Sigmoid (through copies) is judged by how far its probabilities
    moved, computed from the values they read: the KL divergence, weighted by the float model's
    probabilities. Energy would not do there: confident samples saturate the probabilities (a
    classifier's at 98 dB on samples whose logits are at 30), and logits carry offsets softmax
    ignores and thousands of classes nobody reads (a recognizer's at 3 dB). An output a Concat
    writes is judged part by part, each part as an output of its own: a detector's boxes (pixels,
    in the hundreds) beside its class scores (0 to 1) would otherwise be judged by the boxes
    alone, and the scores decide which boxes are kept."""
    judged: dict[str, _Judged] = {}
    for output in model.graph.outputs:
        for found in _judged_parts(output, _opset(model)):
            judged.setdefault(found.name, found)
    _expose(model, list(judged))
    return list(judged.values())


_CONCAT_DEPTH = 3  # Concats of Concats looked into (a YOLOX head: levels, then box/obj/cls)


def _judged_parts(value: ir.Value, opset: int, depth: int = 0) -> list[_Judged]:
    """How ``value`` is judged: through copies, behind a Softmax or Sigmoid, or per Concat part."""
    current = value
    while (producer := current.producer()) is not None and producer.inputs:
        source = producer.inputs[0]
        if source is None or not source.name:
            break
        if producer.op_type in ("Softmax", "LogSoftmax"):
            axis = producer.attributes.get("axis")
            default = -1 if opset >= 13 else 1
            return [_Judged(source.name, "softmax", axis.as_int() if axis is not None else default)]
        if producer.op_type == "Sigmoid":
            return [_Judged(source.name, "sigmoid")]
        if producer.op_type == "Concat" and depth < _CONCAT_DEPTH:
            parts = [v for v in producer.inputs
                     if v is not None and v.name and v.const_value is None]
            if len(parts) > 1:
                return [j for part in parts for j in _judged_parts(part, opset, depth + 1)]
        if producer.op_type not in _COPIES:
            break
        current = source
    return [_Judged(value.name or "", "energy")]


def _expose(model: ir.Model, names: Sequence[str]) -> None:
    """Make the values called ``names`` graph outputs (those that are not already)."""
    graph = model.graph
    by_name = {v.name: v for n in graph for v in n.outputs if v.name}
    for name in names:
        exposed = by_name.get(name)
        if exposed is not None and exposed not in graph.outputs:
            graph.outputs.append(exposed)


def _opset(model: ir.Model) -> int:
    return int(model.opset_imports.get("", model.opset_imports.get("ai.onnx", 13)))
