"""Calibrating a placement: one streaming pass over the data, one scale per scale group.

1. Every tensor of a scale group is observed (running min/max and the 2048-bin |x| histogram;
   no histogram for ``max``); batches are dropped once folded in, so memory does not grow with
   the number of samples. Other float tensors can be watched for their range only (the FP16
   remainder needs to know what would overflow). A tensor needing no histogram (every one with
   ``max``, every watched one) is reduced to its min and max inside the onnxruntime session
   (``core.activations`` rule 4): only histogram tensors are copied out whole.
2. A group's amax comes from the union of its tensors' statistics (``observers.merged``) by the
   requested method; every member gets that scale. Per tensor the record keeps its own observed
   range and the share of its values the group's amax clips.
3. Histograms are dyadic and order-free, so scales do not depend on batch size or order.
4. onnxruntime runs the next batch while this one is folded into the statistics (it releases the
   GIL): the histogram work hides in the gaps of onnxruntime's threads. Two batches of activations
   are then alive, still a fixed amount whatever the number of samples.
5. When every tensor is reduced inside the session (``max``), folding costs nothing and the runs
   are the whole cost: two batches then run at once, each on half the cores. Independent runs
   keep every core busy where one run's threads wait for each other at every operator (on two
   cores this took the pass from 1.6x to 1.35x of plain inference). It needs at least four
   batches (fewer would leave cores idle) and holds one more batch of onnxruntime's own
   buffers; with histograms the folding thread is the bottleneck, so one run at a time keeps
   all the cores.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import numpy as np
import onnx

from qdqkit.core.activations import ActivationRunner
from qdqkit.core.calibration import TensorCalibration, calibrate, clipped_fraction
from qdqkit.core.host_ops import HostForward
from qdqkit.core.numerics import available_cores
from qdqkit.core.observers import TensorObserver, TensorRange, merged

Batch = dict[str, np.ndarray | TensorRange]  # one batch's observed tensors, whole or reduced

# Run the next batch while this one is folded into the statistics (see ``_in_flight``).
LOOK_AHEAD = True
# Rule 5: batches run at once when folding is free, and the fewest batches worth it.
PARALLEL_RUNS = 2
_PARALLEL_MIN_BATCHES = 4


@dataclass(frozen=True)
class TensorScale:
    """The calibrated scale of one quantized tensor and the evidence behind it."""

    tensor: str
    group: str
    scale: float
    amax: float
    method: str
    requested: str
    minimum: float
    maximum: float
    clipped_fraction: float
    count: int

    def as_dict(self) -> dict[str, object]:
        return {"tensor": self.tensor, "group": self.group, "scale": self.scale,
                "amax": self.amax, "method": self.method, "requested": self.requested,
                "observed_range": [self.minimum, self.maximum],
                "clipped_fraction": self.clipped_fraction, "count": self.count}


@dataclass
class Calibrated:
    """Scales per group and per tensor, ranges of watched tensors, what could not be observed."""

    group_scales: dict[str, float]
    tensors: list[TensorScale]
    ranges: dict[str, tuple[float, float]]
    skipped: tuple[str, ...]
    blocked_nodes: tuple[str, ...]
    samples: int
    batches: int
    # Per group, the observers of its members: scales by another method need no second pass.
    observers: dict[str, list[TensorObserver]] = field(default_factory=dict)
    requested: str = "max"
    percentile: float = 99.99
    # Each (group, method) calibrated so far: the histogram searches are the costly part of
    # ``auto``, whose choice by the output asks for the same ones again.
    results: dict[tuple[str, str], TensorCalibration] = field(default_factory=dict)
    # Watched float tensors that held infinities or a NaN the model replaces (its own: an
    # attention mask of -inf, a softmax over a row masked whole).
    non_finite: tuple[str, ...] = ()
    # Seconds spent building the onnxruntime session, before the first batch ran.
    session_seconds: float = 0.0

    def result(self, group: str, method: str) -> TensorCalibration:
        """``group``'s calibration by ``method`` (computed once)."""
        known = self.results.get((group, method))
        if known is None:
            known = calibrate(merged(group, self.observers[group]), method,
                              percentile=self.percentile)
            self.results[(group, method)] = known
        return known

    def candidates(self, group: str, methods: Sequence[str]) -> dict[str, float]:
        """The amax each of ``methods`` gives ``group``."""
        return {m: self.result(group, m).amax for m in methods}

    def choose(self, methods: Mapping[str, str]) -> Calibrated:
        """The same statistics with ``methods[group]`` calibrating each group it names (the
        others keep theirs); what each tensor records follows."""
        scales = dict(self.group_scales)
        records = [t for t in self.tensors if t.group not in methods]
        for group, method in methods.items():
            seen = self.observers[group]
            result = self.result(group, method)
            scales[group] = result.scale
            records += _records(group, seen, result, self.requested)
        order = {t.tensor: i for i, t in enumerate(self.tensors)}
        records.sort(key=lambda t: order[t.tensor])
        return replace(self, group_scales=scales, tensors=records)


def _records(group: str, seen: Sequence[TensorObserver], result: TensorCalibration,
             requested: str) -> list[TensorScale]:
    records = []
    for observer in seen:
        clipped = (clipped_fraction(observer, result.amax) if observer.histogram is not None
                   else float(observer.absmax > result.amax))
        records.append(TensorScale(
            observer.name, group, result.scale, result.amax, result.method, requested,
            observer.minimum, observer.maximum, clipped, observer.count))
    return records


def calibrate_groups(
    model: onnx.ModelProto,
    groups: Mapping[str, Sequence[str]],
    batches: Iterable[Mapping[str, np.ndarray]],
    *,
    method: str,
    percentile: float,
    watch: Sequence[str] = (),
    on_batch: Callable[[int], None] | None = None,
    forwards: Mapping[str, HostForward] | None = None,
    on_feeds: Callable[[Mapping[str, np.ndarray]], None] | None = None,
    expected_batches: int | None = None,
) -> Calibrated:
    """Observe ``groups``' tensors (and the ranges of ``watch``) over ``batches``; scale groups.

    ``on_feeds`` sees each batch of feeds (``quantization.by_output`` keeps a few samples).
    ``expected_batches``, when the caller knows it, keeps a short pass to one run at a time."""
    quantized = list(dict.fromkeys(name for members in groups.values() for name in members))
    histogram = method != "max"
    wanted = set(quantized)
    watched = [w for w in watch if w not in wanted]
    runs = _parallel_runs(histogram, expected_batches)
    cores = _cores()
    # A watched tensor may hold infinities by design (an attention mask of -inf), or a NaN the
    # model replaces itself: its FP16 fate is judged by its finite values. A quantized one
    # needs a finite range for its scale, and any other NaN is an error naming the tensor.
    built = time.perf_counter()
    runner = ActivationRunner(model, [*quantized, *watched], forwards=forwards,
                              ranges_only=watched if histogram else [*quantized, *watched],
                              threads=max(1, cores // runs) if runs > 1 else 0,
                              tolerant=watched)
    built = time.perf_counter() - built
    observers = {name: TensorObserver(name, histogram=histogram and name in wanted)
                 for name in runner.observed}
    samples = count = 0
    for feeds, tensors in _in_flight(runner, batches, runs):
        for name, array in tensors.items():
            observers[name].update(array)
        del tensors  # this batch and the ones running ahead are all the activations alive
        if on_feeds is not None:
            on_feeds(feeds)
        first = next(iter(feeds.values()), None)
        in_batch = int(first.shape[0]) if first is not None and first.ndim else 1
        samples += in_batch
        count += 1
        if on_batch is not None:
            on_batch(in_batch)
    skipped = set(runner.skipped)
    group_scales: dict[str, float] = {}
    records: list[TensorScale] = []
    kept: dict[str, list[TensorObserver]] = {}
    results: dict[tuple[str, str], TensorCalibration] = {}
    for group, members in groups.items():
        seen = [observers[m] for m in members if m in observers and observers[m].count]
        if not seen or any(m in skipped for m in members):
            continue
        result: TensorCalibration = calibrate(merged(group, seen), method, percentile=percentile)
        group_scales[group] = result.scale
        records += _records(group, seen, result, method)
        kept[group] = seen
        results[(group, method)] = result
    ranges = {name: (obs.minimum, obs.maximum) for name, obs in observers.items()
              if name not in wanted and obs.count and obs.minimum <= obs.maximum}
    non_finite = tuple(name for name, obs in observers.items() if obs.non_finite)
    return Calibrated(group_scales, records, ranges, tuple(sorted(skipped)),
                      runner.blocked_nodes, samples, count, kept, method, percentile, results,
                      non_finite=non_finite, session_seconds=built)


def _cores() -> int:
    """The cores this process may use (its own function, so a test can stand in another machine)."""
    return available_cores()


def _parallel_runs(histogram: bool, expected_batches: int | None) -> int:
    """How many batches run at once (rule 5)."""
    if histogram or _cores() < 2 or (expected_batches is not None
                                     and expected_batches < _PARALLEL_MIN_BATCHES):
        return 1
    return PARALLEL_RUNS


def _in_flight(
    runner: ActivationRunner, batches: Iterable[Mapping[str, np.ndarray]], runs: int
) -> Iterator[tuple[Mapping[str, np.ndarray], Batch]]:
    """Each batch with its activations, in order; the next ``runs`` batches already run while
    the caller folds this one into the statistics (onnxruntime releases the GIL), so
    ``runs + 1`` batches live at once."""
    if not LOOK_AHEAD:
        for feeds in batches:
            yield feeds, _run_one(runner, feeds)
        return
    pool = ThreadPoolExecutor(max_workers=runs, thread_name_prefix="qdqkit-calibration")
    pending: deque[tuple[Mapping[str, np.ndarray], Future[Batch]]] = deque()
    try:
        for feeds in batches:
            pending.append((feeds, pool.submit(_run_one, runner, feeds)))
            if len(pending) > runs:
                done, started = pending.popleft()
                yield done, started.result()
        while pending:
            done, started = pending.popleft()
            yield done, started.result()
    finally:
        # On an error (or an abandoned pass) the queued runs are dropped, not run to the end.
        pool.shutdown(wait=True, cancel_futures=True)


def _run_one(runner: ActivationRunner, feeds: Mapping[str, np.ndarray]) -> Batch:
    return next(runner.run_reduced([feeds]))
