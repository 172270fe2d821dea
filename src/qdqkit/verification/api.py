"""``verify``: prove numerically that a translation kept the Q/DQ model's meaning, with a verdict.

We emulate what TensorRT's implicit INT8 computes from the translated bundle (``emulation`` states
the rules: fake quantization at every cached scale, weights requantized per output channel at
max|w|/127 as TensorRT does, FP16 rounding in the layers pinned to FP16) and run it in onnxruntime
(float optimizations only, see core.numerics); its outputs are compared with the original Q/DQ
model's on the same inputs (``core.data``: a file, or seeded random samples sized and ranged from
the model). The Q/DQ model runs as an ``--int8 --fp16`` build of it computes: its layers that
the translation pins to FP16 round to FP16 too (``emulation`` rule 4), so the figure measures
what the translation changed, not what FP16 costs both builds.

The verdict: pass when every output's SNR is at least ``min_snr_db`` and both models produced
finite outputs. When a finite output falls short, each stretch of layers is run alone on the Q/DQ
model's own values (``layerwise``): if every one is at least ``min_snr_db`` the gap is rounding
that the network amplifies and the translation passes; else the worst stretch is named. With
``split`` (and always on a failure, unless ``split=False``) the sources of loss are also emulated
one step at a time (``LossSource``), so a low figure says where it comes from.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from qdqkit.core import numerics
from qdqkit.core.data import DataRequest, open_data
from qdqkit.core.errors import QdqkitError
from qdqkit.core.model_io import file_sha256, load_model
from qdqkit.core.shapes import fill_value_types
from qdqkit.core.upcast import upcast_float16
from qdqkit.passes.constants_to_initializers import ConstantsToInitializers
from qdqkit.passes.scales import ScaleOrigin, ScaleTable
from qdqkit.report.text import decibels
from qdqkit.translation.fp16 import select_fp16_nodes
from qdqkit.translation.writer import SOURCE_KEY, OutputPaths
from qdqkit.trt.calib_cache import CalibCache, read_calib_cache
from qdqkit.trt.layer_args import parse_layer_precisions
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
    reference_name_map,
    reference_names,
    round_to_fp16,
)
from qdqkit.verification.layerwise import LayerCheck, check_layers
from qdqkit.verification.running import Accumulator, compare, run_reference, write_temporary

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
    requantized as TensorRT does (the full emulation). The layers pinned to FP16 round in every
    step, on both sides (``emulation`` rule 4). A drop from one step to the next is what that
    source costs.
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
    # Tensors rounded to FP16 in the emulation that the Q/DQ model has no counterpart of: their
    # rounding is on one side only, so it counts as loss.
    fp16_unmatched: list[str] = field(default_factory=list)
    # When the outputs fall short: each stretch of layers alone (``layerwise``).
    layers: LayerCheck | None = None

    @property
    def min_snr_db(self) -> float:
        return min((o.snr_db for o in self.outputs), default=float("nan"))

    @property
    def verdict(self) -> str:
        """The one line a script or a person reads last."""
        worst = decibels(self.min_snr_db)
        required = f"{self.min_snr_required_db:g} dB"
        if self.passed and self.min_snr_db >= self.min_snr_required_db:
            return f"PASS: min SNR {worst} dB >= {required}"
        layers = self.layers
        if self.passed and layers is not None:
            matched = ("exactly" if layers.exact == layers.compared else
                       f"(min {decibels(layers.min_snr_db)} dB at '{layers.worst}' >= {required})")
            return (f"PASS: every layer matches the Q/DQ model's on its own inputs {matched}; "
                    f"the outputs differ at {worst} dB because this network's INT8 layers "
                    "amplify rounding differences")
        return f"FAIL: {'; '.join(self.failures)}"


@dataclass
class _Emulation:
    session: Any  # None once the emulation has run (see _compare)
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
    layers: bool | None = None,
) -> VerifyResult:
    """Verify the bundle in ``translated_dir`` against ``qdq_model``.

    ``split``: True always emulates each source of loss alone too, None (default) only when the
    verdict is a failure, False never. ``layers``: True always checks layer by layer too
    (``layerwise``), None (default) only when an output falls short, False never.
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

    # Both models are validated like every input (readable, external data inside its folder, a
    # valid graph) before any session is built; weights are mapped, not read, so this costs little.
    reference_model = load_model(qdq_path, lazy_weights=True, validate=True)
    interface = _interface_proto(reference_model)
    names = [v.name or "" for v in reference_model.graph.outputs]
    noqdq = _load_noqdq(paths)
    recorded_source = noqdq.metadata_props.get(SOURCE_KEY)
    available = {v.name for v in noqdq.graph.outputs}
    absent = [n for n in names if n not in available]
    if absent:
        raise QdqkitError(
            f"{paths.noqdq_model}: has no output '{absent[0]}' that {qdq_path} has; translate again"
        )
    unscaled = _unscaled_tensors(noqdq, cache, _fp32_layers(paths))
    in_reference, unmatched = reference_names(noqdq.graph, reference_model.graph, unscaled)
    anchor_names = reference_name_map(noqdq.graph, reference_model.graph, cache.scales)
    del noqdq  # each emulation loads its own copy, after the Q/DQ model's session is gone
    if isinstance(inputs, DataRequest):
        data = inputs.open(interface)
    elif inputs is not None:
        data = open_data(inputs, interface)
    else:
        data = open_data("random", interface, limit=samples, shapes=shapes, seed=seed)

    # One model at a time, never both: the Q/DQ model runs over every sample and only its outputs
    # are kept; its session is freed before the emulation is built, so the peak is one model's.
    fp16_model = upcast_float16(reference_model)
    if in_reference:  # the FP16 layers round here too, as an --int8 --fp16 build runs them
        ConstantsToInitializers()(reference_model)  # as in the emulation: constants are weights
        fill_value_types(reference_model)
        round_to_fp16(reference_model.graph, in_reference)
    # The scratch folder outlives the reference run: the layer check reads the file again.
    scratch = tempfile.TemporaryDirectory(prefix="qdqkit-verify-")
    try:
        # onnxruntime reads an unchanged fp32 file itself; a changed model goes over a temporary
        # file (see ``_emulate`` for why not in memory).
        changed = fp16_model or bool(in_reference)
        reference = write_temporary(reference_model, scratch.name) if changed else qdq_path
        del reference_model
        numerics.release_freed_memory(collect=True)
        with ThreadPoolExecutor(max_workers=1) as pool:
            # Hashing the Q/DQ file (to match the bundle's record) overlaps the session's build.
            digest = pool.submit(file_sha256, qdq_path) if recorded_source is not None else None
            with data.explaining_guesses():  # a shape random data guessed may not run
                expected, used_shapes, count = run_reference(reference, data, names)
            try:
                source_recorded = check_source(recorded_source, digest.result() if digest else None,
                                               qdq_path, paths.noqdq_model)
            except QdqkitError:
                expected.close()
                raise
        if count == 0:
            raise QdqkitError(f"{data.description}: holds no samples; give at least one")
        try:
            full = _emulate(paths, cache, ALL_SOURCES, unscaled, fp16_model)
            accumulators: dict[Source | None, dict[str, Accumulator]] = {
                None: compare(expected, full, data, "emulating TensorRT")}
            variants: list[Source | None] = [None]
            if split or (split is None and not _passes(accumulators[None], min_snr_db)):
                # Where the loss comes from: the first steps alone, on the same inputs.
                for step, emulation in _split_variants(paths, cache, unscaled, fp16_model):
                    accumulators[step] = compare(expected, emulation, data,
                                                  f"emulating {step.value}")
                    variants.append(step)
        finally:
            expected.close()

        comparisons = [
            OutputComparison(n, *_metrics(accumulators[None][n])) for n in names
        ]
        failures = _failures(comparisons, min_snr_db)
        layer_check = None
        if layers or (layers is None and failures and all(o.finite for o in comparisons)):
            # Outputs short of the bar: is it one layer, or rounding the network amplifies?
            model, _ = _emulation_model(paths, cache, ALL_SOURCES, unscaled, fp16_model)
            layer_check = check_layers(reference, model, anchor_names, cache.scales, data)
            del model
            if not failures:
                pass
            elif layer_check.min_snr_db >= min_snr_db and all(o.finite for o in comparisons):
                failures = []
            else:
                failures.append(f"layer by layer, '{layer_check.worst}' is at "
                                f"{decibels(layer_check.min_snr_db)} dB")
    finally:
        scratch.cleanup()
    loss_sources = []
    if len(variants) > 1:
        steps = {Source.ACTIVATIONS: accumulators[Source.ACTIVATIONS],
                 Source.WEIGHTS: accumulators[None]}
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
        fp16_unmatched=unmatched,
        layers=layer_check,
    )


def _load_noqdq(paths: OutputPaths, validate: bool = True) -> ir.Model:
    return load_model(paths.noqdq_model, lazy_weights=True, validate=validate)


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


def _fp32_layers(paths: OutputPaths) -> frozenset[str]:
    """The layers the bundle's ``--layerPrecisions`` keeps FP32 (a mixed-precision source's
    float32 nodes, kept there for their range): the build runs them FP32, so the emulation must
    not round what they write to FP16."""
    return frozenset(n for n, p in _layer_precisions(paths).items() if p == "fp32")


def _float_layers(paths: OutputPaths) -> frozenset[str]:
    """Every layer ``--layerPrecisions`` pins to FP16 or FP32: none runs INT8, so none has its
    weight requantized."""
    return frozenset(_layer_precisions(paths))


def _layer_precisions(paths: OutputPaths) -> dict[str, str]:
    if not paths.layer_arg.is_file():
        return {}
    try:
        return dict(parse_layer_precisions(paths.layer_arg.read_text()))
    except QdqkitError as exc:
        raise QdqkitError(f"{paths.layer_arg}: {exc}; translate the model again") from None


def _unscaled_tensors(model: ir.Model, cache: CalibCache,
                      fp32_layers: frozenset[str] = frozenset()) -> list[str]:
    """The tensors an ``--int8 --fp16`` build of the bundle computes in FP16: no cached scale,
    written by a layer the build does not keep FP32."""
    fill_value_types(model)
    table = ScaleTable()
    for value in (*model.graph.inputs, *(out for node in model.graph for out in node.outputs)):
        if value.name in cache.scales:
            table.set(value, cache.scales[value.name], ScaleOrigin.QDQ, "cache")
    fp32_nodes = frozenset(n for n in model.graph if n.name in fp32_layers) if fp32_layers \
        else None
    return select_fp16_nodes(model.graph, table, fp32_nodes=fp32_nodes).unscaled_tensors


def _emulate(
    paths: OutputPaths, cache: CalibCache, sources: frozenset[Source], unscaled: list[str],
    upcast: bool,
) -> _Emulation:
    """A session emulating ``sources`` on the bundle's Q/DQ-free model.

    The emulation model reaches onnxruntime through a temporary file (``write_temporary``), so our
    copy of its weights is freed before the session is built.
    """
    model, emulation = _emulation_model(paths, cache, sources, unscaled, upcast)
    with tempfile.TemporaryDirectory(prefix="qdqkit-verify-") as folder:
        path = write_temporary(model, folder)
        del model
        numerics.release_freed_memory(collect=True)
        emulation.session = numerics.make_session(path, optimize=True, spin=False)
    emulation.input_types = {s.name: s.dtype for s in numerics.input_specs(emulation.session)}
    return emulation


def _emulation_model(
    paths: OutputPaths, cache: CalibCache, sources: frozenset[Source], unscaled: list[str],
    upcast: bool,
) -> tuple[ir.Model, _Emulation]:
    """The bundle's Q/DQ-free model emulating ``sources``, and what the emulation did."""
    model = _load_noqdq(paths, validate=False)  # verify validated it before any session
    # A weight in a Constant node is a weight to TensorRT's parser, as an initializer is.
    ConstantsToInitializers()(model)
    fill_value_types(model)
    if upcast:
        # fp16 models run in fp32 on both sides: onnxruntime's fp16 CPU kernels change between
        # versions, and that is not what this comparison is about (see core.upcast).
        upcast_float16(model)
    weights = (0, 0)
    if Source.WEIGHTS in sources:
        weights = quantize_weights(model.graph, set(cache.scales), _float_layers(paths))
    fp16 = round_to_fp16(model.graph, unscaled) if Source.FP16 in sources else 0
    missing: list[str] = []
    scaled = 0
    if Source.ACTIVATIONS in sources:
        # Exactly 1.0 is the DLA unary marker (--add_unary_ew_scales_for_dla): the DLA compiler
        # reads it as "no requantization", so it is not emulated as an int8 step of 1.0.
        real = {n: s for n, s in cache.scales.items() if s != 1.0}
        missing = insert_fake_quant(model, real)
        scaled = len(real) - len(missing)
    return model, _Emulation(None, {}, scaled, weights, fp16, missing)


# The split adds one source at a time, in this order; the last step is the full emulation. FP16
# rounding is in every step: the reference has it too (``emulation`` rule 4).
_STEPS = (Source.ACTIVATIONS, Source.WEIGHTS)


def _split_variants(
    paths: OutputPaths, cache: CalibCache, unscaled: list[str], upcast: bool
) -> Iterator[tuple[Source, _Emulation]]:
    """Emulations of the first steps alone, built one at a time (activation scales). Each is
    closed by the caller before the next is built."""
    for count, step in enumerate(_STEPS[:-1], start=1):
        sources = frozenset({Source.FP16, *_STEPS[:count]})
        yield step, _emulate(paths, cache, sources, unscaled, upcast)


def _metrics(acc: Accumulator) -> tuple[float, float, float, bool]:
    if acc.non_finite:
        return float("nan"), float("nan"), float("nan"), False
    m = acc.result()
    return m.snr_db, m.cosine, m.max_abs, True


def _passes(accumulators: Mapping[str, Accumulator], min_snr_db: float) -> bool:
    comparisons = [OutputComparison(n, *_metrics(a)) for n, a in accumulators.items()]
    return not _failures(comparisons, min_snr_db)


def _failures(comparisons: list[OutputComparison], min_snr_db: float) -> list[str]:
    failures = []
    for o in comparisons:
        if not o.finite:
            failures.append(f"output '{o.name}' has NaN or infinite values")
        elif not o.snr_db >= min_snr_db:
            failures.append(f"output '{o.name}' SNR {decibels(o.snr_db)} dB < {min_snr_db:g} dB")
    if not comparisons:
        failures.append("the model has no outputs to compare")
    return failures


def _loss_source(
    source: Source, accumulators: Mapping[str, Accumulator], names: list[str]
) -> LossSource:
    snr = {n: _metrics(accumulators[n])[0] for n in names}
    return LossSource(source.value, min(snr.values(), default=float("nan")), snr)
