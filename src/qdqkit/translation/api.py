"""``translate``: any producer's Q/DQ model -> Q/DQ-free model + scales for implicit INT8.

Steps (each a pass or a small function with its own module):
1. load (core.model_io refuses unreadable, truncated or escaping files) and check what implicit INT8
   can carry (``refusals``), and name weights whose scales TensorRT will recompute
   (``weight_scales``); optionally rename node outputs (the reference's first step);
2. strip every Q/DQ, keeping activation scales by tensor (``StripQdqPairs``), fold constant weight
   paths (TF Reshape/Transpose), BatchNormalization and zero Pads into their Convs;
3. propagate scales to a fixpoint (``propagate``), choose FP16 layers (``fp16``), write the four files
   atomically (``writer``).
4. A mixed-precision source (a float16 remainder, as TensorRT 11 models carry) whose inputs and
   outputs are float32 is widened to float32 first (``core.upcast``), its float32 nodes noted to
   be pinned FP32 as before. Implicit INT8 takes each layer's precision from the build flags and
   ``--layerPrecisions``, not from tensor types; float16 types would only round every dequantized
   and folded weight to float16, and TensorRT would derive its weight scales (max|w|/127) from
   those rounded values, moving every per-channel scale by up to 2^-12.
5. The nodes ``qdqkit quantize`` kept FP32 for their range, recorded in the model's metadata
   (``core.kept_float``), are pinned FP32 too: in a float32 model (``--trt 10``, or a TensorRT 11
   model whose remainder could not be FP16) nothing else shows them.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field
from pathlib import Path

import onnx_ir as ir
from onnx_ir.passes.common import RemoveUnusedNodesPass

from qdqkit.core.errors import QdqkitError, UnsupportedModelError
from qdqkit.core.gc_pause import paused_cyclic_gc
from qdqkit.core.kept_float import FP32_KEY, kept_float
from qdqkit.core.model_io import file_sha256, load_model
from qdqkit.core.qdq import QdqView, is_qdq, node_label
from qdqkit.core.upcast import upcast_float16
from qdqkit.core.validation import validate_model
from qdqkit.passes.fold_batchnorm import FoldBatchNormIntoConv
from qdqkit.passes.fold_pad import FoldPadIntoConv
from qdqkit.passes.fold_weight_path import FoldWeightReshapeTranspose
from qdqkit.passes.name_nodes import NameUnnamedNodes, RenameNodeOutputs
from qdqkit.passes.scales import ScaleOrigin, ScaleTable
from qdqkit.passes.strip_qdq import StripQdqPairs
from qdqkit.translation.fp16 import (
    Fp16Selection,
    explicit_fp32_nodes,
    float_weight_layers,
    select_fp16_nodes,
)
from qdqkit.translation.propagate import PropagationOptions, propagate_scales
from qdqkit.translation.refusals import check_translatable
from qdqkit.translation.weight_scales import WeightScaleMismatch, scan_weight_scales
from qdqkit.translation.writer import SOURCE_KEY, OutputPaths, write_outputs
from qdqkit.trt.calib_cache import check_version

log = logging.getLogger("qdqkit.translation")


@dataclass
class TranslateOptions:
    """The reference translator's flags; ``check_weight_scales`` is its ``calibration_type``.

    The reference skips its weight-scale check for ``calibration_type="histogram"``; that spelling
    is still accepted (``TranslateOptions(calibration_type="histogram")``) and sets
    ``check_weight_scales`` to False.
    """

    trt_calib_version: str = "8600"
    infer_average_pool_scales: bool = False
    infer_concat_scales: bool = False
    infer_mul_scales: bool = False
    check_weight_scales: bool = True
    addtl_ops_to_infer_adjacent_scales: tuple[str, ...] = ()
    rename_node_outputs: bool = False
    add_unary_ew_scales_for_dla: bool = False
    calibration_type: InitVar[str | None] = None

    def __post_init__(self, calibration_type: str | None) -> None:
        if calibration_type is not None:
            self.check_weight_scales = calibration_type == "max"

    def propagation(self) -> PropagationOptions:
        return PropagationOptions(
            average_pool=self.infer_average_pool_scales,
            concat=self.infer_concat_scales,
            mul=self.infer_mul_scales,
            extra_ops=tuple(self.addtl_ops_to_infer_adjacent_scales),
        )


@dataclass
class MixedReaders:
    """A tensor the Q/DQ model reads both through a Q and directly (``readers``).

    Implicit INT8 keeps one scale per tensor, so the direct readers get quantized values too;
    ``verify`` shows what that costs. Quantizing that branch in the Q/DQ model removes the gap.
    """

    tensor: str
    readers: list[str]


# Element-wise activations whose output range follows their input's closely enough that copying a
# scale across them (--addtl_ops_to_infer_adjacent_scales) is what users do to keep them INT8.
HINT_OPS = frozenset({"LeakyRelu", "PRelu", "Clip", "Elu", "HardSwish", "HardSigmoid", "Relu6"})


@dataclass
class PropagationHint:
    """The option that would shrink the FP16 list, measured: ``fp16_after`` layers instead."""

    ops: list[str]
    option: str
    fp16_before: int
    fp16_after: int


@dataclass
class Translation:
    """The in-memory result: the Q/DQ-free model and what goes into the three text files."""

    model: ir.Model
    scales: dict[str, float]
    fp16_nodes: list[str]
    unscaled_tensors: list[str]
    qdq_scale_count: int
    propagated_scale_count: int
    unary_tensors: list[str]
    qdq_removed: int
    qdq_left: int
    folded_batchnorms: int
    folded_pads: int
    folded_weight_ops: int
    weight_scale_mismatches: list[WeightScaleMismatch]
    warnings: list[str]
    mixed_readers: list[MixedReaders]
    propagation_hint: PropagationHint | None = None
    # Nodes a mixed-precision source computes in float32 on purpose (``translation.fp16``).
    fp32_nodes: list[str] = field(default_factory=list)


@dataclass
class TranslateResult:
    input: str
    outputs: OutputPaths
    nodes_before: int
    nodes_after: int
    qdq_removed: int
    qdq_left: int
    activation_scales: int
    propagated_scales: int
    unary_scales: list[str]
    fp16_nodes: list[str]
    unscaled_tensors: list[str]
    folded_batchnorms: int
    folded_pads: int
    weight_scale_mismatches: list[WeightScaleMismatch]
    warnings: list[str]
    mixed_readers: list[MixedReaders]
    seconds: float
    trt_calib_version: str = "8600"
    propagation_hint: PropagationHint | None = None
    fp32_nodes: list[str] = field(default_factory=list)


def translate_model(
    model: ir.Model, options: TranslateOptions, where: str = "model", *, validated: bool = False
) -> Translation:
    """Translate ``model`` in place (it becomes the Q/DQ-free model).

    ``validated``: the model was loaded with ``load_model(..., validate=True)``; otherwise it is
    validated here.
    """
    graph = model.graph
    if not validated:
        validate_model(model, where)
    view = QdqView(graph)
    constants = view.constant_values
    warnings = check_translatable(view, where, constants)
    # Always scanned: a weight already on TensorRT's grid is stored as the Q/DQ pair computes it
    # whatever the flag, which only decides whether the others are reported.
    weight_scan = scan_weight_scales(view)
    mismatches = weight_scan.mismatches if options.check_weight_scales else []
    half_quantized = float_weight_layers(view)  # read before the Q/DQ go
    fp32_nodes = explicit_fp32_nodes(graph)
    if fp32_nodes is not None and _float32_interface(graph):
        # Rule 4: widened before any weight is dequantized or folded.
        upcast_float16(model)
        view = QdqView(graph)
        constants = view.constant_values
    NameUnnamedNodes()(model)
    fp32_nodes = _with_recorded_fp32(graph, fp32_nodes, kept_float(model, FP32_KEY))
    if options.rename_node_outputs:
        RenameNodeOutputs()(model)
    scales = ScaleTable()
    strip = StripQdqPairs(scales, constants, view, remove_dead_constants=True,
                          dequantize_float_layer_weights=True,
                          dequantized_weights=weight_scan.on_grid)
    strip(model)
    warnings += strip.conflicts
    mixed = list(strip.mixed_readers.items())
    weights = FoldWeightReshapeTranspose()
    weights(model)
    batchnorms = FoldBatchNormIntoConv(scales)
    batchnorms(model)
    pads = FoldPadIntoConv(scales)
    pads(model)
    RemoveUnusedNodesPass()(model)
    left = [n for n in graph if is_qdq(n)]
    if left:  # the promise is zero Q/DQ in the output; never write a file that breaks it
        raise UnsupportedModelError(
            f"{where}: Q/DQ '{node_label(left[0])}' could not be removed "
            f"({len(left)} left); this spelling is not supported yet"
        )
    if model.ir_version < 4:
        # IR 3 requires every initializer to be a graph input; the new float weights are not.
        warnings.append(f"IR version raised from {model.ir_version} to 4 (new weights are not inputs)")
        model.ir_version = 4
    log.debug(
        "%s: removed %d Q/DQ; folded %d weight ops, %d BatchNormalization, %d Pad",
        where, strip.removed, weights.folded, len(batchnorms.folded), pads.folded,
    )
    mixed_readers = [
        MixedReaders(value.name or "", readers) for value, readers in mixed
    ]
    qdq_count = sum(1 for e in scales if e.origin is ScaleOrigin.QDQ)
    propagated = propagate_scales(graph, scales, options.propagation())
    # The hint starts from the scales before the DLA unary ones that selecting may add.
    propagated_only = _copy_scales(scales) if options.add_unary_ew_scales_for_dla else scales
    selection = select_fp16_nodes(graph, scales, options.add_unary_ew_scales_for_dla, fp32_nodes)
    hint = _propagation_hint(graph, propagated_only, selection, options, fp32_nodes)
    # Layers the Q/DQ model runs float with a float weight, its activation quantized: pinned
    # after the hint, which no propagation changes.
    pinned = set(selection.nodes) | set(selection.fp32_nodes)
    selection.nodes += [n.name or "" for n in half_quantized if n.name not in pinned]
    named = _scales_by_name(graph, scales)
    _check_printable(where, named, selection.nodes)
    if log.isEnabledFor(logging.DEBUG):
        for entry in scales:
            log.debug("scale %-48s %.9g  (%s: %s)", entry.value.name, entry.scale,
                      entry.origin.value, entry.source)
        for tensor in selection.unscaled_tensors:
            log.debug("no scale for %s: its readers run FP16", tensor)
    return Translation(
        model=model,
        scales=named,
        fp16_nodes=selection.nodes,
        unscaled_tensors=selection.unscaled_tensors,
        qdq_scale_count=qdq_count,
        propagated_scale_count=propagated,
        unary_tensors=selection.unary_tensors,
        qdq_removed=strip.removed,
        qdq_left=len(left),
        folded_batchnorms=len(batchnorms.folded),
        folded_pads=pads.folded,
        folded_weight_ops=weights.folded,
        weight_scale_mismatches=mismatches,
        warnings=warnings,
        mixed_readers=mixed_readers,
        propagation_hint=hint,
        fp32_nodes=selection.fp32_nodes,
    )


def _copy_scales(table: ScaleTable) -> ScaleTable:
    new = ScaleTable()
    for entry in table:
        new.set(entry.value, entry.scale, entry.origin, entry.source)
    return new


def _propagation_hint(
    graph: ir.Graph, scales: ScaleTable, selection: Fp16Selection, options: TranslateOptions,
    fp32_nodes: frozenset[ir.Node] | None = None,
) -> PropagationHint | None:
    """If FP16 layers are activations a propagation option covers, measure what it would save.

    ``scales`` is the propagated table and ``selection`` the FP16 layers chosen from it; the wider
    option runs on a copy (``scales`` is not changed), so it costs one more propagation and FP16
    selection, both linear, and only when such layers exist.
    """
    propagation = options.propagation()
    before = selection.nodes
    if not before and not selection.unscaled_tensors:
        return None
    by_name = {node.name: node for node in graph if node.name}
    values = {out.name: out for node in graph for out in node.outputs if out.name}
    # The activations that are FP16 themselves or write a tensor left without a scale.
    involved = {by_name[n].op_type for n in before if n in by_name}
    for tensor in selection.unscaled_tensors:
        producer = values[tensor].producer() if tensor in values else None
        if producer is not None:
            involved.add(producer.op_type)
    ops = sorted(involved & (HINT_OPS - propagation.op_set()))
    # A Concat whose output has a scale and its inputs none: an explicit build moves that Q in
    # front of the Concat (B4), so the inputs are INT8 there; the implicit one needs the flag.
    concat = not propagation.concat and "Concat" in involved
    if not ops and not concat:
        return None
    wider = _copy_scales(scales)
    extra = PropagationOptions(propagation.average_pool, propagation.concat or concat,
                               propagation.mul, (*propagation.extra_ops, *ops))
    propagate_scales(graph, wider, extra)
    after = select_fp16_nodes(graph, wider, options.add_unary_ew_scales_for_dla, fp32_nodes).nodes
    if len(after) >= len(before):
        return None
    flags = ["--infer_concat_scales"] if concat else []
    if ops:
        flags.append("--addtl_ops_to_infer_adjacent_scales " + " ".join(
            (*options.addtl_ops_to_infer_adjacent_scales, *ops)))
    return PropagationHint((["Concat"] if concat else []) + ops, " ".join(flags), len(before),
                           len(after))


def _with_recorded_fp32(graph: ir.Graph, explicit: frozenset[ir.Node] | None,
                        recorded: Mapping[str, str]) -> frozenset[ir.Node] | None:
    """Rule 5: the nodes ``quantize`` kept FP32 for their range (``core.kept_float``), added to a
    mixed-precision source's float32 nodes. A float32 model shows no such choice in its types,
    and an ``--int8 --fp16`` build would run those nodes FP16, past FP16's range."""
    if not recorded:
        return explicit
    named = frozenset(node for node in graph if node.name in recorded)
    return (explicit or frozenset()) | named


def _float32_interface(graph: ir.Graph) -> bool:
    """Whether the network's inputs and outputs are float32 (or not float at all)."""
    return all(v.dtype != ir.DataType.FLOAT16 for v in (*graph.inputs, *graph.outputs))


# One regex search a name: a generator over its characters costs ~10x more, thousands of times.
_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")


def _check_printable(where: str, scales: dict[str, float], fp16_nodes: list[str]) -> None:
    """The cache and the layer-argument file are lines of text: a name with a control character
    (``\n``, ``\r``, ...) would break them, so it is refused for every output format at once."""
    for kind, names in (("tensor", scales), ("node", fp16_nodes)):
        for name in names:
            if _CONTROL_CHARACTER.search(name):
                raise UnsupportedModelError(
                    f"{where}: {kind} {name!r} has a control character in its name, which the "
                    "calibration cache and --layerPrecisions cannot carry; rename it in the model"
                )


def _scales_by_name(graph: ir.Graph, scales: ScaleTable) -> dict[str, float]:
    """Scales of tensors still in the graph, by name, in table order."""
    inputs = set(graph.inputs)
    named: dict[str, float] = {}
    for entry in scales:
        value = entry.value
        producer = value.producer()
        alive = value in inputs or (producer is not None and producer.graph is graph)
        if alive and value.name and value.name not in named:
            named[value.name] = entry.scale
    return named


def translate(
    model_path: str | os.PathLike[str],
    output_dir: str | os.PathLike[str] = "translated",
    options: TranslateOptions | None = None,
) -> TranslateResult:
    """Translate one Q/DQ model file into the four implicit-INT8 files in ``output_dir``."""
    options = options or TranslateOptions()
    version = check_version(options.trt_calib_version)
    with paused_cyclic_gc():
        return _translate_file(Path(model_path), Path(output_dir), options, version)


def _translate_file(
    path: Path, output_dir: Path, options: TranslateOptions, version: str
) -> TranslateResult:
    start = time.perf_counter()
    model = load_model(path, lazy_weights=True, validate=True)
    nodes_before = len(model.graph)
    translation = translate_model(model, options, where=str(path), validated=True)
    paths = OutputPaths.for_model(output_dir, path.stem)
    if not path.stem:
        raise QdqkitError(f"{path}: cannot name outputs after a file without a name")
    # verify refuses a bundle checked against another model than the one it came from.
    model.metadata_props[SOURCE_KEY] = file_sha256(path)
    write_outputs(paths, model, translation.scales, translation.fp16_nodes, version, (path,),
                  fp32_nodes=translation.fp32_nodes)
    return TranslateResult(
        input=str(path),
        outputs=paths,
        nodes_before=nodes_before,
        nodes_after=len(model.graph),
        qdq_removed=translation.qdq_removed,
        qdq_left=translation.qdq_left,
        activation_scales=translation.qdq_scale_count,
        propagated_scales=translation.propagated_scale_count,
        unary_scales=translation.unary_tensors,
        fp16_nodes=translation.fp16_nodes,
        unscaled_tensors=translation.unscaled_tensors,
        folded_batchnorms=translation.folded_batchnorms,
        folded_pads=translation.folded_pads,
        weight_scale_mismatches=translation.weight_scale_mismatches,
        warnings=translation.warnings,
        mixed_readers=translation.mixed_readers,
        seconds=time.perf_counter() - start,
        trt_calib_version=version,
        propagation_hint=translation.propagation_hint,
        fp32_nodes=translation.fp32_nodes,
    )
