"""``qdqkit.quantize``: a float ONNX model to a TensorRT-ready INT8 Q/DQ model.

The pipeline: refuse what cannot be quantized (``prepare``) -> place Q/DQ the way TensorRT
fuses them (``trt.placement``) -> observe the placed tensors over the data in one streaming pass
and scale each group (``calibrate``) -> insert Q/DQ (``passes.insert_qdq``) -> for TensorRT 11,
turn the float remainder into FP16 except what would overflow (``passes.float16_remainder``) ->
predict and lint the engine -> write ``OUT.onnx`` and ``OUT.quant.json`` atomically.
The caller's model and file are never changed.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx
import onnx_ir as ir

from qdqkit.core.atomic import output_set
from qdqkit.core.calibration import DEFAULT_PERCENTILE, METHODS
from qdqkit.core.data import CalibrationData, DataSource, open_data
from qdqkit.core.errors import QdqkitError
from qdqkit.core.host_ops import HostForward
from qdqkit.core.images import Preprocess
from qdqkit.core.initializers import drop_orphaned, unread_initializers
from qdqkit.core.kept_float import FP32_KEY, record_kept_float
from qdqkit.core.model_io import load_model, stage_model
from qdqkit.core.progress import Progress
from qdqkit.core.qdq import WEIGHTED_OPS, node_label
from qdqkit.core.shapes import infer_value_types
from qdqkit.linting import lint
from qdqkit.quantization.by_output import SampleKeeper, choose_by_output, written_output_snr
from qdqkit.quantization.calibrate import calibrate_groups
from qdqkit.quantization.equalize import equalize_depthwise
from qdqkit.quantization.fp16_watch import Fp16Watch, fp16_watch
from qdqkit.quantization.fp32_pins import Fp32Pins, fp32_pins
from qdqkit.quantization.prepare import (
    default_opset,
    refuse_quantized,
    unrunnable_nodes,
    upgrade_opset,
)
from qdqkit.quantization.result import QuantizeResult, WeightedReport
from qdqkit.quantization.settle import settle
from qdqkit.report.json_output import dumps_json
from qdqkit.trt.placement import Placement, plan_placement
from qdqkit.trt.versions import TARGETS, normalize_trt_version

HIGH_PRECISIONS = ("fp16", "fp32")
FP16_OPSET = 19  # Q/DQ take and give float16 from opset 19 on
# Every tensor DLA needs a range for carries its own Q/DQ (placement, I2); the one tensor left
# to translate is a residual Add's conv input, whose unary scale keeps the accumulator unscaled
# (I4). The propagation flags would only guess ranges the Q/DQ model does not use, such as a
# Mul's product rule turned on a constant (H7), and clip what it keeps.
DLA_TRANSLATE_FLAGS = "--add_unary_ew_scales_for_dla"


def quantize(
    model: str | os.PathLike[str] | onnx.ModelProto | ir.Model,
    data: DataSource,
    *,
    output: str | os.PathLike[str] | None = None,
    method: str = "auto",
    percentile: float = DEFAULT_PERCENTILE,
    trt: str | None = None,
    target: str = "gpu",
    high_precision: str = "fp16",
    exclude: Sequence[str] = (),
    per_tensor_weights: bool = False,
    keep_unpaid: bool = False,
    batch: int | None = None,
    calib_limit: int | None = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
    preprocess: Preprocess | None = None,
    seed: int = 0,
    progress: bool | None = False,
    custom_ops: Mapping[str, HostForward] | None = None,
    smooth_quant: float | None = None,
    equalize: bool = True,
) -> QuantizeResult:
    """Quantize ``model`` on ``data`` (any iterable of ``{input name: array}``, a file, a folder,
    or ``"random"``); with ``output``, write ``output`` and ``<output stem>.quant.json``.

    ``custom_ops`` maps an op type (or ``"domain::op_type"``) onnxruntime cannot run to a numpy
    ``forward(*inputs, **attributes)``: such nodes stay float, but what follows them is
    calibrated instead of being left float too. ``smooth_quant`` (alpha, e.g. 0.5) migrates
    activation outliers of LayerNorm/Linear outputs into the weights of the MatMuls that read
    them (``quantization.smooth``; one more pass over the data). ``keep_unpaid`` keeps the INT8
    regions the cost model predicts slower than FP16 (``quantization.settle``). ``equalize``
    evens out the channel ranges depthwise convolutions read with exact power-of-two factors
    where TensorRT fuses them (``quantization.equalize``; GPU only, not on random data nor with
    per-tensor weights). ``shapes`` are the input shapes you deploy: the engine is predicted,
    and which INT8 regions pay judged, at them (without them, at the first batch's shapes, which
    for samples calibrated one by one is batch 1); random data is drawn at them.
    """
    start = time.perf_counter()
    clock = _Phases(start)
    if target not in TARGETS:
        raise QdqkitError(f"unknown target '{target}': use one of {', '.join(TARGETS)}")
    trt = normalize_trt_version(trt if trt is not None else default_trt(target))
    if method not in METHODS:
        raise QdqkitError(f"unknown calibration method '{method}': use one of {', '.join(METHODS)}")
    if high_precision not in HIGH_PRECISIONS:
        raise QdqkitError(f"--high-precision must be fp16 or fp32, not '{high_precision}'")
    where, proto, source_path = _load(model)
    out_path = Path(output) if output is not None else None
    if out_path is not None and out_path.suffix.lower() != ".onnx":
        raise QdqkitError(f"{out_path}: the output must be an .onnx file")
    refuse_quantized(ir.from_proto(proto), where)
    warnings: list[str] = []
    proto = upgrade_opset(proto, where, in_place=True)  # ``proto`` is our own copy
    fp16 = trt == "11" and high_precision == "fp16" and target == "gpu"
    # TensorRT <= 10 builds the float32 remainder with --fp16: what FP16 cannot hold is pinned.
    pin = trt != "11" and high_precision == "fp16" and target == "gpu"
    if fp16 and default_opset(proto) < FP16_OPSET:
        try:
            proto = upgrade_opset(proto, where, FP16_OPSET, in_place=True)
        except QdqkitError as exc:
            fp16 = False
            warnings.append(f"the float remainder stays FP32: {exc}")
    proto = _normalized(proto)
    clock.lap("load")
    random_data = isinstance(data, str) and data == "random"
    if shapes and not random_data:
        _check_deployed_shapes(proto, shapes, where)
    calibration_data = open_data(data, proto, batch=batch, limit=calib_limit,
                                 shapes=shapes if random_data else None,
                                 preprocess=preprocess, seed=seed)
    quantized = ir.from_proto(proto)
    types = infer_value_types(quantized)
    blocked = unrunnable_nodes(quantized, {f.domain for f in proto.functions}, custom_ops)
    placement = plan_placement(quantized, target=target, exclude=exclude, blocked=blocked,
                               types=types)
    smoothed: list[dict[str, Any]] = []
    clock.lap("plan")
    if smooth_quant is not None:
        if not 0.0 <= smooth_quant <= 1.0:
            raise QdqkitError(f"the SmoothQuant alpha must be in [0, 1], not {smooth_quant}")
        from qdqkit.quantization.smooth import smooth, why_nothing_smoothed

        with calibration_data.explaining_guesses():
            smoothed = smooth(quantized, proto, set(placement.quantized_weighted),
                              calibration_data, smooth_quant)
        if smoothed:
            proto = ir.serde.serialize_model(quantized)
            # Explicit smoothing puts a Mul in front of the MatMuls: the points move onto it.
            types = infer_value_types(quantized)
            placement = plan_placement(quantized, target=target, exclude=exclude,
                                       blocked=blocked, types=types)
        else:
            warnings.append("--smooth-quant rescaled nothing: " + why_nothing_smoothed(
                quantized, set(placement.quantized_weighted)))
        clock.lap("smooth-quant")
    equalized: list[dict[str, Any]] = []
    # Per-tensor weight scales cannot absorb per-channel factors: equalizing would crush the
    # weights of the channels it scales up.
    if equalize and target == "gpu" and not calibration_data.is_random and not per_tensor_weights:
        equalized = equalize_depthwise(quantized, proto, set(placement.quantized_weighted),
                                       calibration_data, float16_scales=fp16, progress=progress)
        if equalized:
            proto = ir.serde.serialize_model(quantized)
            types = infer_value_types(quantized)
            placement = plan_placement(quantized, target=target, exclude=exclude,
                                       blocked=blocked, types=types)
        clock.lap("equalize")
    groups = {name: [v.name or "" for v in members] for name, members in placement.groups.items()}
    # The FP16 remainder needs the range of every float tensor the engine writes to memory.
    watch = fp16_watch(quantized, types, {n for members in groups.values() for n in members}
                       ) if fp16 or pin else Fp16Watch([])
    # ``auto`` keeps a few samples to choose each group's method by the output error.
    # Not for random data (its error means nothing) nor a model onnxruntime cannot run whole.
    by_output = (method == "auto" and not calibration_data.is_random and not blocked
                 and bool(groups))
    keeper = SampleKeeper(calibration_data.inputs) if by_output else None
    clock.lap("plan")
    with (Progress("calibrating", total=calibration_data.total_samples, enabled=progress) as bar,
          calibration_data.explaining_guesses()):
        calibrated = calibrate_groups(proto, groups, calibration_data, method=method,
                                      percentile=percentile, watch=watch.tensors,
                                      on_batch=bar.advance,
                                      forwards=custom_ops,
                                      on_feeds=keeper.offer if keeper is not None else None,
                                      expected_batches=_batch_count(calibration_data))
    clock.lap("calibration passes")
    clock.split("calibration passes", "calibration session", calibrated.session_seconds)
    if calibrated.samples == 0:
        raise QdqkitError(f"{calibration_data.description}: no calibration samples; give data")
    if batch is not None and batch > 1 and calibrated.batches > -(-calibrated.samples // batch):
        warnings.append(f"--batch {batch}: samples of different shapes cannot share a batch, so "
                        f"the {calibrated.samples} samples ran in {calibrated.batches} batches "
                        "(pad them to one shape to batch them)")
    chosen: dict[str, Any] = {}
    if keeper is not None:
        try:
            choice = choose_by_output(quantized, placement, calibrated, keeper.samples(),
                                      per_tensor_weights=per_tensor_weights)
        except QdqkitError as exc:  # the per-tensor picks stand; say why
            warnings.append(f"auto kept its per-tensor picks: judging by the output failed ({exc})")
        else:
            calibrated = calibrated.choose(choice.methods)
            chosen = {"samples": len(keeper.samples()), "runs": choice.runs,
                      "gain_db": {name: _db(error) for name, error in choice.errors.items()},
                      "output_snr_db": {name: None if snr is None else round(snr, 2)
                                        for name, snr in choice.snr_db.items()}}
        clock.lap("auto by output")
    scales = calibrated.group_scales
    missing = [p.value.name for p in placement.points if p.group not in scales]
    if missing:
        raise QdqkitError(f"tensor '{missing[0]}' could not be calibrated; exclude its reader "
                          "with --exclude")
    judged_shapes = ({name: [int(d) for d in dims] for name, dims in shapes.items()}
                     if shapes else _data_shapes(quantized, calibration_data))
    searched = _plan_signature(placement)  # what ``auto`` measured, before settle drops any
    fp16_ranges = watch.ranges(calibrated.ranges, {
        t.tensor: (t.minimum, t.maximum) for t in calibrated.tensors})
    settled = settle(
        proto, (quantized, placement, blocked),
        lambda fresh, kept: plan_placement(fresh, target=target, exclude=exclude, blocked=kept,
                                           types=types),
        {name: scales[group] for group, members in groups.items() for name in members},
        per_tensor_weights=per_tensor_weights,
        fp16_ranges=fp16_ranges if fp16 else None,
        trt=trt, target=target,
        shapes=judged_shapes, judge=not keep_unpaid)
    # Only the nodes onnxruntime cannot run stay "float and untouched"; the ones settle kept
    # float are weighted-op decisions, reported with their reasons in ``weighted``.
    untouched = {node_label(n) for n in blocked}
    quantized, placement, blocked = settled.model, settled.placement, settled.blocked
    if chosen and keeper is not None and _plan_signature(placement) != searched:
        # Settle kept part of the searched placement float: the SNR the search measured is not
        # the written model's, so the written model is run on the same samples.
        chosen["output_snr_db"] = {
            name: None if snr is None else round(snr, 2) for name, snr in
            written_output_snr(ir.from_proto(proto), quantized, keeper.samples()).items()}
    fp32_nodes = settled.fp32_nodes
    pins = fp32_pins(quantized, fp16_ranges, trt, types) if pin else Fp32Pins()
    if pin:
        fp32_nodes = pins.reasons
    clock.lap("settle")
    kept = set(placement.observed_tensors())
    nested = _weighted_in_subgraphs(quantized)
    if nested:
        ops = ", ".join(f"{n} {op}" for op, n in sorted(nested.items()))
        warnings.append(f"{ops} inside subgraphs (If, Loop, Scan bodies) stay float: Q/DQ go in "
                        "the main graph only")
    if not placement.points:
        why = ("no INT8 layer pays for itself in this model (see why each weighted op stayed "
               "float)" if placement.weighted else "the main graph has no Conv, ConvTranspose, "
               "Gemm or MatMul with a stored weight")
        warnings.append(f"nothing was quantized: {why}; the output has no Q/DQ and builds "
                        "without --int8")
    if calibration_data.is_random:
        warnings.append("calibrated on random data: the scales are meaningless for accuracy; "
                        "calibrate on real samples before deploying")
        guessed = calibration_data.guessed
        if guessed:
            warnings.append(
                f"random data guessed the symbolic dimensions {', '.join(guessed)}; which ops "
                "gain from INT8 was judged at those shapes: give --shapes with the shapes you "
                "deploy")
    options = {
        "method": method, "percentile": percentile, "trt": trt, "target": target,
        "high_precision": high_precision,
        "float_remainder": "fp16" if fp16 else "fp32", "exclude": list(exclude),
        "per_tensor_weights": per_tensor_weights, "keep_unpaid": keep_unpaid,
        "batch": calibration_data.batch,
        "calib_limit": calib_limit, "smooth_quant": smooth_quant, "equalize": equalize,
        "shapes": {name: [int(d) for d in dims] for name, dims in shapes.items()} if shapes
        else None,
    }
    calibration = {
        "data": calibration_data.description, "random": calibration_data.is_random,
        "samples": calibrated.samples, "batches": calibrated.batches, "smoothed": smoothed,
        "equalized": equalized,
    }
    if calibrated.non_finite:
        calibration["non_finite_float_tensors"] = list(calibrated.non_finite)
    if chosen:
        calibration["auto_by_output"] = chosen
    _stamp(quantized, options, calibration)
    record_kept_float(quantized, {node_label(d.node): d.reason for d in placement.weighted
                                  if not d.quantized and d.reason})
    record_kept_float(quantized, fp32_nodes, FP32_KEY)  # translate pins them (core.kept_float)
    linted = lint(quantized, trt=trt, target=target, shapes=_shape_spec(judged_shapes))
    lint_warnings: dict[str, int] = {}
    for group in linted.groups:
        count = sum(1 for f in group.findings if f.severity.value == "warning")
        if count:
            lint_warnings[group.code] = count
    clock.lap("lint")
    result = QuantizeResult(
        source=where, output=str(out_path) if out_path else None,
        report=str(report_path(out_path)) if out_path else None,
        options=options, calibration=calibration,
        tensors=[t for t in calibrated.tensors if t.tensor in kept],
        weighted=[WeightedReport(node_label(d.node), d.node.op_type, d.quantized, d.reason, d.macs)
                  for d in placement.weighted],
        int8_ops=[node_label(n) for n in placement.int8_ops],
        float_nodes={label: why for n, why in blocked.items()
                     if (label := node_label(n)) in untouched},
        fp32_nodes=fp32_nodes, engine=linted.summary, lint_errors=linted.errors,
        lint_warnings=lint_warnings,
        trtexec=trtexec_line(out_path or Path("model_int8.onnx"), trt, target,
                             high_precision=high_precision, pins=pins,
                             int8=bool(placement.points)),
        seconds=0.0, warnings=warnings, model=quantized, judged_shapes=judged_shapes,
    )
    if out_path is not None:
        protected = (source_path,) if source_path is not None else ()
        with output_set(protected) as outputs:
            stage_model(outputs, quantized, out_path)
            outputs.stage_text(report_path(out_path), dumps_json(result.report_json()))
        clock.lap("write")
    result.seconds = time.perf_counter() - start
    result.phases = clock.phases
    return result


class _Phases:
    """Wall seconds per step of a run: each ``lap`` is the time since the one before."""

    def __init__(self, start: float) -> None:
        self.phases: dict[str, float] = {}
        self._last = start

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.phases[name] = self.phases.get(name, 0.0) + now - self._last
        self._last = now

    def split(self, whole: str, part: str, seconds: float) -> None:
        """Move ``seconds`` of ``whole`` into ``part``, listed before it."""
        total = self.phases.pop(whole)
        self.phases[part] = seconds
        self.phases[whole] = total - seconds


def _weighted_in_subgraphs(model: ir.Model) -> Counter[str]:
    """The Conv, ConvTranspose, Gemm and MatMul nodes inside subgraphs (If, Loop, Scan bodies)
    by op type: placement leaves them float. Their weights may arrive as a Loop's carried
    values, so every such op counts."""
    found: Counter[str] = Counter()
    for node in model.graph:
        for attr in node.attributes.values():
            bodies = ([attr.as_graph()] if attr.type == ir.AttributeType.GRAPH else
                      list(attr.as_graphs()) if attr.type == ir.AttributeType.GRAPHS else [])
            found.update(inner.op_type for body in bodies
                         for inner in ir.traversal.RecursiveGraphIterator(body)
                         if inner.op_type in WEIGHTED_OPS)
    return found


def _plan_signature(placement: Placement) -> tuple[frozenset[object], frozenset[str]]:
    """What a placement quantizes, by name: each point's tensor and readers, and the weighted
    nodes (names survive the re-parses settle makes)."""
    points = frozenset(
        (p.value.name or "", None if p.readers is None
         else tuple(sorted(node_label(r) for r in p.readers)))
        for p in placement.points)
    return points, frozenset(node_label(n) for n in placement.quantized_weighted)


def _batch_count(data: CalibrationData) -> int | None:
    """How many batches ``data`` holds, when it knows its sample count."""
    if data.total_samples is None:
        return None
    return -(-data.total_samples // max(data.batch, 1))


def _db(relative_error: float) -> float | None:
    """How far below the per-tensor picks' an output error is, in dB, rounded for the report;
    None when the output was exact."""
    if relative_error <= 0:
        return None
    return round(-10.0 * math.log10(relative_error), 2)


def default_trt(target: str) -> str:
    """The TensorRT version ``quantize`` builds for when none is given: 11 on the GPU; 10 for
    DLA, the last version whose DLA runs INT8 (TensorRT 11 has none before 11.4.1, and that one
    only FP16: I9)."""
    return "10" if target == "dla" else "11"


def report_path(output: Path) -> Path:
    return output.with_name(output.stem + ".quant.json")


def trtexec_line(output: Path, trt: str, target: str, *, high_precision: str = "fp16",
                 pins: Fp32Pins | None = None, int8: bool = True) -> str:
    """The build line: TensorRT 11 takes the model's own types; TensorRT <= 10 builds
    ``--int8`` plus ``--fp16`` for an FP16 remainder, with the FP32 pins (``fp32_pins``).

    A model with no Q/DQ (``int8`` False) builds without ``--int8``: given no calibration
    cache and no Q/DQ, trtexec's ``--int8`` runs every layer it can in INT8 on placeholder
    scales, and ``translate`` has no scale to turn into a cache."""
    if target == "dla" and not int8:
        return (f"trtexec --onnx={output} --fp16 --useDLACore=0 --allowGPUFallback")
    if target == "dla":
        folder = output.with_name(output.stem + "_dla")
        base = folder / output.stem
        return (f"qdqkit translate -i {output} -o {folder} {DLA_TRANSLATE_FLAGS} && trtexec "
                f"--onnx={base}_noqdq.onnx --calib={base}_precision_config_calib.cache --int8 "
                "--fp16 --useDLACore=0 --allowGPUFallback --precisionConstraints=prefer "
                f"--layerPrecisions=$(cat {base}_precision_config_layer_arg.txt)")
    if trt == "11":
        return f"trtexec --onnx={output}"
    flags = ["--int8"] if int8 else []
    if high_precision == "fp16":
        flags += ["--fp16", *(pins.flags() if pins is not None else [])]
    return " ".join([f"trtexec --onnx={output}", *flags])


def _load(
    model: str | os.PathLike[str] | onnx.ModelProto | ir.Model,
) -> tuple[str, onnx.ModelProto, Path | None]:
    if isinstance(model, ir.Model):
        return "<in-memory model>", ir.serde.serialize_model(model), None
    if isinstance(model, onnx.ModelProto):
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        return "<in-memory model>", copy, None
    path = Path(model)
    load_model(path, lazy_weights=True)  # vets the file; external data stays inside its folder
    try:
        proto = onnx.load(path)  # external data read in: the model is rewritten whole
    except Exception as exc:
        raise QdqkitError(f"{path}: cannot be read as an ONNX model ({exc})") from None
    return str(path), proto, path


def _normalized(proto: onnx.ModelProto) -> onnx.ModelProto:
    """Constant-node weights as initializers (initializers no longer listed as inputs), constant
    Reshape/Transpose chains on weights computed ahead, and weights computed from constants by
    other ops evaluated once, so every weight is stored. A BatchNormalization after a Conv is
    folded into it, as TensorRT builds it, and so is a constant per-channel scale and shift
    (``Mul``/``Add``: a BatchNormalization some exporters write reduced): the weight quantized
    is then the one the engine runs, and ``translate`` of the output has no fold left to do, so
    ``verify`` compares the same arithmetic (a BN kept apart and folded later rounds
    differently, and the INT8 layers downstream magnify those differences)."""
    from qdqkit.passes.constants_to_initializers import ConstantsToInitializers
    from qdqkit.passes.fold_batchnorm import FoldBatchNormIntoConv
    from qdqkit.passes.fold_channel_affine import FoldChannelAffineIntoConv
    from qdqkit.passes.fold_computed_weights import FoldComputedWeights
    from qdqkit.passes.fold_weight_path import FoldWeightReshapeTranspose

    model = ir.from_proto(proto)
    unread_before = unread_initializers(model.graph)
    moved = ConstantsToInitializers()(model).modified
    folded = FoldWeightReshapeTranspose()(model).modified
    folded = FoldComputedWeights()(model).modified or folded
    folded = FoldBatchNormIntoConv()(model).modified or folded
    folded = FoldChannelAffineIntoConv()(model).modified or folded
    if moved or folded:
        model.ir_version = max(model.ir_version or 0, 7)
        drop_orphaned(model.graph, unread_before)  # the folded BatchNormalizations' parameters
        return ir.serde.serialize_model(model)
    return proto


def _data_shapes(model: ir.Model, data: Any) -> dict[str, list[int]] | None:
    """The input shapes of the first calibration batch, when the model leaves some dimension
    symbolic: the engine is predicted, and placement judged, at the shapes the data has."""
    if all(value.shape is not None and all(isinstance(d, int) for d in value.shape)
           for value in model.graph.inputs):
        return None
    batch = next(iter(data), None)  # re-reads one batch; a spent one-shot iterator gives none
    if not batch:
        return None
    return {name: [int(d) for d in array.shape] for name, array in batch.items()}


def _check_deployed_shapes(proto: onnx.ModelProto, shapes: Mapping[str, Sequence[int]],
                           where: str) -> None:
    """Deployed shapes must name the model's inputs, with their rank and fixed dimensions, and
    give every input the model leaves dynamic."""
    from qdqkit.core.model_inputs import model_inputs
    from qdqkit.core.shape_spec import check_shapes

    check_shapes({spec.name: spec.dims for spec in model_inputs(proto)}, shapes, where,
                 require_dynamic=True)


def _shape_spec(shapes: Mapping[str, list[int]] | None) -> str | None:
    # A scalar input has no dimension to give (trtexec's --shapes leaves it out too).
    sized = {name: dims for name, dims in (shapes or {}).items() if dims}
    if not sized:
        return None
    return ",".join(f"{name}:{'x'.join(str(d) for d in dims)}" for name, dims in sized.items())


def _stamp(model: ir.Model, options: dict[str, Any], calibration: dict[str, Any]) -> None:
    """Record how the model was quantized in its metadata (random data is never silent)."""
    model.metadata_props["qdqkit.quantize"] = json.dumps(
        {"options": options, "calibration": calibration}, sort_keys=True)
    if calibration["random"]:
        model.metadata_props["qdqkit.calibration"] = (
            "random data: INT8 scales are meaningless for accuracy")


__all__ = ["QuantizeResult", "quantize", "report_path", "trtexec_line"]
