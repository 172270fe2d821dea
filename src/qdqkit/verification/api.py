"""``verify``: prove numerically that a translation kept the Q/DQ model's meaning, with a verdict.

We emulate what TensorRT's implicit INT8 computes from the translated bundle (``emulation`` states
the rules: fake quantization at every cached scale, weights requantized per output channel at
max|w|/127 as TensorRT does, FP16 rounding in the layers pinned to FP16) and run it in onnxruntime
(optimizations off, see core.numerics); its outputs are compared with the original Q/DQ model's on
the same inputs (``core.data``: a file, or seeded random samples sized and ranged from the model).

The verdict: pass when every output's SNR is at least ``min_snr_db`` and both models produced
finite outputs. With ``split`` (and always on a failure, unless ``split=False``) the sources of loss
are also emulated one step at a time (``LossSource``), so a low figure says where it comes from.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from qdqkit.core import numerics
from qdqkit.core.data import DataRequest, open_data
from qdqkit.core.errors import QdqkitError
from qdqkit.core.model_io import load_model
from qdqkit.core.progress import Progress
from qdqkit.core.shapes import fill_value_types
from qdqkit.core.upcast import upcast_float16
from qdqkit.passes.scales import ScaleOrigin, ScaleTable
from qdqkit.translation.fp16 import select_fp16_nodes
from qdqkit.translation.writer import SOURCE_KEY, OutputPaths
from qdqkit.trt.calib_cache import CalibCache, read_calib_cache
from qdqkit.verification.bundle import (
    check_cache_scales,
    check_source,
    find_bundle,
    precision_config_matches_cache,
)
from qdqkit.verification.emulation import (
    ALL_SOURCES,
    Source,
    insert_fake_quant,
    quantize_weights,
    round_to_fp16,
)

DEFAULT_MIN_SNR_DB = 40.0


@dataclass
class OutputComparison:
    name: str
    snr_db: float
    cosine: float
    max_abs: float
    finite: bool = True


@dataclass
class LossSource:
    """One step of the split: the emulation with this source added to the ones before it.

    Steps: activation scales as cached (weights as the bundle stores them); then weights
    requantized as TensorRT does; then layers pinned to FP16 (the full emulation). A drop from
    one step to the next is what that source costs.
    """

    source: str
    min_snr_db: float
    snr_db: dict[str, float]


@dataclass
class VerifyResult:
    qdq_model: str
    translated_model: str
    calib_cache: str
    inputs: str
    samples: int
    shapes: dict[str, list[int]]
    outputs: list[OutputComparison]
    scaled_tensors: int
    quantized_weights: int
    changed_weights: int
    fp16_tensors: int
    unscaled_tensors: list[str]
    config_matches_cache: bool
    source_recorded: bool
    min_snr_required_db: float
    passed: bool
    failures: list[str]
    loss_sources: list[LossSource] = field(default_factory=list)
    missing_tensors: list[str] = field(default_factory=list)
    unary_tensors: list[str] = field(default_factory=list)

    @property
    def min_snr_db(self) -> float:
        return min((o.snr_db for o in self.outputs), default=float("nan"))

    @property
    def verdict(self) -> str:
        """The one line a script or a person reads last."""
        worst = _db(self.min_snr_db)
        if self.passed:
            return f"PASS: min SNR {worst} dB >= {self.min_snr_required_db:g} dB"
        return f"FAIL: {'; '.join(self.failures)}"


def _db(value: float) -> str:
    return "inf" if math.isinf(value) and value > 0 else f"{value:.1f}"


@dataclass
class _Emulation:
    session: Any
    input_types: dict[str, np.dtype]
    scaled: int = 0
    weights: tuple[int, int] = (0, 0)
    fp16_tensors: int = 0
    missing: list[str] = field(default_factory=list)


def verify(
    qdq_model: str | os.PathLike[str],
    translated_dir: str | os.PathLike[str],
    inputs: str | os.PathLike[str] | DataRequest | None = None,
    *,
    seed: int = 0,
    samples: int = 4,
    shapes: Mapping[str, Sequence[int]] | None = None,
    min_snr_db: float = DEFAULT_MIN_SNR_DB,
    split: bool | None = None,
) -> VerifyResult:
    """Verify the bundle in ``translated_dir`` against ``qdq_model``.

    ``split``: True always emulates each source of loss alone too, None (default) only when the
    verdict is a failure, False never.
    """
    if samples < 1:
        raise QdqkitError(f"--samples must be at least 1, not {samples}; zero samples prove nothing")
    if not math.isfinite(min_snr_db):
        raise QdqkitError(f"--min-snr must be a finite number of dB, not {min_snr_db}")
    qdq_path, folder = Path(qdq_model), Path(translated_dir)
    paths = find_bundle(qdq_path, folder)
    cache = read_calib_cache(paths.calib_cache)
    check_cache_scales(cache.scales, paths.calib_cache)
    config_matches = precision_config_matches_cache(paths, cache.scales)

    # Validated like every input (readable, external data inside its folder, a valid graph) before
    # onnxruntime opens it by path; weights are mapped, not read, so the check costs little.
    reference_model = load_model(qdq_path, lazy_weights=True, validate=True)
    interface = _interface_proto(reference_model)
    fp16_model = upcast_float16(reference_model)
    if not fp16_model:
        del reference_model  # onnxruntime reads the file itself; the graph is freed first
    # Float optimizations on both sides, so both run the same kernels: onnxruntime folds each
    # weight's Q/DQ once, with the kernels a run would use, and computes activation Q/DQ as the
    # spec says (none of its Q/DQ fusions).
    reference = numerics.make_session(reference_model if fp16_model else qdq_path, optimize=True)
    if fp16_model:
        del reference_model

    noqdq = _load_noqdq(paths)
    source_recorded = check_source(noqdq.metadata_props.get(SOURCE_KEY), qdq_path,
                                   paths.noqdq_model)
    unscaled = _unscaled_tensors(noqdq, cache)
    full = _emulate(noqdq, cache, ALL_SOURCES, unscaled, fp16_model)
    del noqdq

    if isinstance(inputs, DataRequest):
        data = inputs.open(interface)
    elif inputs is not None:
        data = open_data(inputs, interface)
    else:
        data = open_data("random", interface, limit=samples, shapes=shapes, seed=seed)
    names = [o.name for o in reference.get_outputs()]
    available = {o.name for o in full.session.get_outputs()}
    absent = [n for n in names if n not in available]
    if absent:
        raise QdqkitError(
            f"{paths.noqdq_model}: has no output '{absent[0]}' that {qdq_path} has; translate again"
        )
    variants: dict[Source | None, _Emulation] = {None: full}
    if split:
        variants.update(_split_variants(paths, cache, unscaled, fp16_model))
    accumulators, used_shapes, count = _compare(reference, variants, data, names)
    if count == 0:
        raise QdqkitError(f"{data.description}: holds no samples; give at least one")
    if split is None and not _passes(accumulators[None], min_snr_db):
        # A failure says where its loss comes from: each source alone, on the same inputs.
        alone = _split_variants(paths, cache, unscaled, fp16_model)
        accumulators.update(_compare(reference, alone, data, names)[0])
        variants = {**variants, **alone}

    comparisons = [
        OutputComparison(n, *_metrics(accumulators[None][n])) for n in names
    ]
    failures = _failures(comparisons, min_snr_db)
    loss_sources = []
    if len(variants) > 1:
        steps = {Source.ACTIVATIONS: accumulators[Source.ACTIVATIONS],
                 Source.WEIGHTS: accumulators[Source.WEIGHTS], Source.FP16: accumulators[None]}
        loss_sources = [_loss_source(step, acc, names) for step, acc in steps.items()]
    unary = [name for name, scale in cache.scales.items() if scale == 1.0]
    return VerifyResult(
        qdq_model=str(qdq_path),
        translated_model=str(paths.noqdq_model),
        calib_cache=str(paths.calib_cache),
        inputs=data.description if inputs is not None else
        f"{count} random samples (seed {seed}; floats span each input Q's range, else [-1, 1])",
        samples=count,
        shapes=used_shapes,
        outputs=comparisons,
        scaled_tensors=full.scaled,
        quantized_weights=full.weights[0],
        changed_weights=full.weights[1],
        fp16_tensors=full.fp16_tensors,
        unscaled_tensors=unscaled,
        config_matches_cache=config_matches,
        source_recorded=source_recorded,
        min_snr_required_db=min_snr_db,
        passed=not failures,
        failures=failures,
        loss_sources=loss_sources,
        missing_tensors=full.missing,
        unary_tensors=unary,
    )


def _load_noqdq(paths: OutputPaths) -> ir.Model:
    return load_model(paths.noqdq_model, lazy_weights=True, validate=True)


def _interface_proto(model: ir.Model) -> onnx.ModelProto:
    """What the data layer reads of a model: its inputs and the Qs on them, without the weights."""
    graph = model.graph
    inputs = [ir.serde.serialize_value(v) for v in graph.inputs
              if v.name not in graph.initializers]
    nodes, constants = [], []
    taken: set[str] = set()
    for value in graph.inputs:
        for use in value.uses():
            node = use.node
            if node.op_type != "QuantizeLinear" or use.idx != 0:
                continue
            nodes.append(ir.serde.serialize_node(node))
            for operand in node.inputs[1:]:
                if operand is not None and operand.const_value is not None and operand.name \
                        and operand.name not in taken:
                    taken.add(operand.name)
                    constants.append(ir.serde.serialize_tensor(operand.const_value))
                    constants[-1].name = operand.name
    proto = onnx.helper.make_model(onnx.helper.make_graph(nodes, "inputs", inputs, [], constants))
    return proto


def _unscaled_tensors(model: ir.Model, cache: CalibCache) -> list[str]:
    fill_value_types(model)
    table = ScaleTable()
    for value in (*model.graph.inputs, *(out for node in model.graph for out in node.outputs)):
        if value.name in cache.scales:
            table.set(value, cache.scales[value.name], ScaleOrigin.QDQ, "cache")
    return select_fp16_nodes(model.graph, table).unscaled_tensors


def _emulate(
    model: ir.Model, cache: CalibCache, sources: frozenset[Source], unscaled: list[str],
    upcast: bool,
) -> _Emulation:
    """Turn ``model`` (the Q/DQ-free model, consumed) into a session emulating ``sources``."""
    if upcast:
        # fp16 models run in fp32 on both sides: onnxruntime's fp16 CPU kernels change between
        # versions, and that is not what this comparison is about (see core.upcast).
        upcast_float16(model)
    weights = (0, 0)
    if Source.WEIGHTS in sources:
        weights = quantize_weights(model.graph, set(cache.scales))
    fp16 = round_to_fp16(model.graph, unscaled) if Source.FP16 in sources else 0
    missing: list[str] = []
    scaled = 0
    if Source.ACTIVATIONS in sources:
        # Exactly 1.0 is the DLA unary marker (--add_unary_ew_scales_for_dla): the DLA compiler
        # reads it as "no requantization", so it is not emulated as an int8 step of 1.0.
        real = {n: s for n, s in cache.scales.items() if s != 1.0}
        missing = insert_fake_quant(model, real)
        scaled = len(real) - len(missing)
    session = numerics.make_session(model, optimize=True)
    types = {s.name: s.dtype for s in numerics.input_specs(session)}
    return _Emulation(session, types, scaled, weights, fp16, missing)


# The split adds one source at a time, in this order; the last step is the full emulation.
_STEPS = (Source.ACTIVATIONS, Source.WEIGHTS, Source.FP16)


def _split_variants(
    paths: OutputPaths, cache: CalibCache, unscaled: list[str], upcast: bool
) -> dict[Source | None, _Emulation]:
    """Emulations of the first steps alone: activation scales, then with weights requantized."""
    variants: dict[Source | None, _Emulation] = {}
    for count, step in enumerate(_STEPS[:-1], start=1):
        model = _load_noqdq(paths)
        fill_value_types(model)
        variants[step] = _emulate(model, cache, frozenset(_STEPS[:count]), unscaled, upcast)
    return variants


def _compare(
    reference: Any,
    variants: Mapping[Source | None, _Emulation],
    data: Any,
    names: list[str],
) -> tuple[dict[Source | None, dict[str, _Accumulator]], dict[str, list[int]], int]:
    accumulators = {key: {n: _Accumulator() for n in names} for key in variants}
    shapes: dict[str, list[int]] = {}
    count = 0
    with Progress("verifying", total=data.total_samples) as bar:
        for batch in data:
            for name, array in batch.items():
                shapes.setdefault(name, list(array.shape))
            want = numerics.run(reference, batch, names)
            for key, emulation in variants.items():
                feed = {k: v.astype(emulation.input_types.get(k, v.dtype), copy=False)
                        for k, v in batch.items()}
                got = numerics.run(emulation.session, feed, names)
                for n in names:
                    accumulators[key][n].add(want[n], got[n])
            size = next(iter(batch.values())).shape[0] if batch else 1
            count += size
            bar.advance(size)
    return accumulators, shapes, count


class _Accumulator(numerics.ErrorAccumulator):
    """The streaming metrics, plus whether either side ever produced NaN or infinity."""

    def __init__(self) -> None:
        super().__init__()
        self.non_finite = ""

    def add(self, reference: np.ndarray, test: np.ndarray) -> None:
        if not self.non_finite:
            if not np.isfinite(reference).all():
                self.non_finite = "the Q/DQ model"
            elif not np.isfinite(test).all():
                self.non_finite = "the emulation"
        if self.non_finite:
            return
        super().add(reference, test)


def _metrics(acc: _Accumulator) -> tuple[float, float, float, bool]:
    if acc.non_finite:
        return float("nan"), float("nan"), float("nan"), False
    m = acc.result()
    return m.snr_db, m.cosine, m.max_abs, True


def _passes(accumulators: Mapping[str, _Accumulator], min_snr_db: float) -> bool:
    comparisons = [OutputComparison(n, *_metrics(a)) for n, a in accumulators.items()]
    return not _failures(comparisons, min_snr_db)


def _failures(comparisons: list[OutputComparison], min_snr_db: float) -> list[str]:
    failures = []
    for o in comparisons:
        if not o.finite:
            failures.append(f"output '{o.name}' has NaN or infinite values")
        elif not o.snr_db >= min_snr_db:
            failures.append(f"output '{o.name}' SNR {_db(o.snr_db)} dB < {min_snr_db:g} dB")
    if not comparisons:
        failures.append("the model has no outputs to compare")
    return failures


def _loss_source(
    source: Source, accumulators: Mapping[str, _Accumulator], names: list[str]
) -> LossSource:
    snr = {n: _metrics(accumulators[n])[0] for n in names}
    return LossSource(source.value, min(snr.values(), default=float("nan")), snr)
