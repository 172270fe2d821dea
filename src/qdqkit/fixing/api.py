"""``qdqkit fix`` and ``qdqkit.fix()``: repair any producer's Q/DQ placement so TensorRT fuses it.

1. Weight paths first: a DQ followed by Transpose/Reshape/Identity on a constant weight is folded
   into the weight, BatchNormalization after a quantized conv is folded into it with the weight
   Q/DQ recomputed, quantized biases go back to float, and a Q after the float Cast of a network
   input quantizes the input itself (``passes``).
2. Then rounds: lint, plan the target placement (``passes.qdq_target``: the one policy of
   ``trt.placement`` with the scales the model carries), and call the fix of every fixable finding
   (or of the rules selected), each repairing the nodes and tensors its finding names. Repeat until
   no fixable finding is left or a round changes nothing (at most ``MAX_ROUNDS``).
3. A scale no neighbour carries is calibrated from ``calib`` data with the streaming observers of
   ``quantize``; without data the repair needing it is skipped and listed.
4. A finding still left whose Q/DQ is a Reformat of an INT8 region that does not pay for its
   Reformats (``trt.placement.unpaid_points``, the judge ``quantize`` applies; GPU only) is
   settled as ``quantize`` settles it: the region's nodes read float (``KeepNodesFloat``), the
   decision is recorded in the model for ``lint`` (``core.kept_float``), and the rounds run once
   more without them, but only if the whole engine is predicted faster so (a dropped region
   strands its neighbours behind new Reformats). Otherwise a left standalone Q is weighed alone,
   as ``quantize`` weighs it: its readers are kept float if the engine is predicted faster so.
5. The caller's model and file are never changed; ``dry_run`` writes nothing; the output is written
   atomically and is byte-deterministic.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import onnx
import onnx_ir as ir

from qdqkit.core.atomic import output_set
from qdqkit.core.data import DataRequest, DataSource
from qdqkit.core.errors import QdqkitError
from qdqkit.core.gc_pause import paused_cyclic_gc
from qdqkit.core.initializers import drop_orphaned, unread_initializers
from qdqkit.core.kept_float import kept_float, record_kept_float
from qdqkit.core.model_io import load_model, stage_model
from qdqkit.core.qdq import WEIGHTED_OPS, QdqView, is_qdq, node_label
from qdqkit.fixing.result import EngineFigures, FixAction, FixResult, Unfixed
from qdqkit.fixing.retype import RoundTypes
from qdqkit.linting import check_prediction
from qdqkit.linting.result import LintResult
from qdqkit.passes.float_bias import DequantizeBias
from qdqkit.passes.fold_batchnorm_qdq import FoldBatchNormIntoQuantizedConv
from qdqkit.passes.fold_weight_qdq_path import FoldDequantizedWeightPath
from qdqkit.passes.input_cast_qdq import QuantizeBeforeInputCast
from qdqkit.passes.keep_float import KeepNodesFloat
from qdqkit.passes.name_nodes import NameUnnamedNodes
from qdqkit.passes.qdq_target import QdqTarget, carried_scales, plan_target
from qdqkit.passes.replace_qdq import end_session, start_session
from qdqkit.rules import Finding, RuleUnit, rule, units_for
from qdqkit.trt.build_record import resolve_build
from qdqkit.trt.engine import LayerKind
from qdqkit.trt.engine_analysis import int8_conv_outputs
from qdqkit.trt.placement.policy import matches
from qdqkit.trt.predict import run_prediction
from qdqkit.trt.versions import TARGETS, normalize_trt_version

MAX_ROUNDS = 6
_MIN_IR_VERSION = 7


def fix(
    model: str | os.PathLike[str] | onnx.ModelProto | ir.Model,
    *,
    output: str | os.PathLike[str] | None = None,
    rules: Sequence[str] | None = None,
    trt: str | None = None,
    target: str | None = None,
    calib: DataSource | DataRequest | None = None,
    calib_batch: int | None = None,
    calib_limit: int | None = None,
    keep_float: Sequence[str] = (),
    dry_run: bool = False,
    shapes: Mapping[str, Sequence[int]] | None = None,
) -> FixResult:
    """Repair ``model``'s Q/DQ placement (see the module docstring); with ``output`` (and not
    ``dry_run``), write the repaired model there. ``trt`` and ``target`` left out: what
    ``qdqkit quantize`` recorded in the model, else 8.6 and gpu (``trt.build_record``).
    ``shapes``: the input shapes to weigh Reformats against INT8 savings at (rule 4), for inputs
    with symbolic dimensions; the calibration data's shapes when ``calib`` is given."""
    with paused_cyclic_gc():
        # Graph IR is millions of small linked objects: the collector would rescan them, alive,
        # at every generation threshold, a cost that grows faster than the graph.
        request = calib if isinstance(calib, DataRequest) or calib is None else DataRequest(
            calib, batch=calib_batch, limit=calib_limit)
        return _fix(model, output, rules, trt, target, request, list(keep_float), dry_run,
                    dict(shapes or (request.shapes if request is not None else None) or {}))


def _fix(
    model: str | os.PathLike[str] | onnx.ModelProto | ir.Model,
    output: str | os.PathLike[str] | None,
    rules: Sequence[str] | None,
    trt: str | None,
    target: str | None,
    calib: DataRequest | None,
    keep_float: list[str],
    dry_run: bool,
    shapes: dict[str, Sequence[int]],
) -> FixResult:
    start = time.perf_counter()
    if trt is not None:
        trt = normalize_trt_version(trt)
    if target is not None and target not in TARGETS:
        raise QdqkitError(f"unknown target '{target}': use one of {', '.join(TARGETS)}")
    out_path = Path(output) if output is not None else None
    if out_path is not None and out_path.suffix.lower() != ".onnx":
        raise QdqkitError(f"{out_path}: the output must be an .onnx file")
    fixers = _fixers(rules)
    where, working, source_path = _load(model)
    # Initializers the model leaves unread stay as they are; the ones repairs orphan go.
    unread_before = unread_initializers(working.graph)
    if shapes:  # checked now, not only once a round comes to weigh Reformats
        from qdqkit.core.shape_spec import check_shapes, declared_dims

        check_shapes(declared_dims(working.graph.inputs), shapes, where)
    trt, target, from_model = resolve_build(working, trt, target)
    first, types, view = _check(working, trt, target)
    before = _figures(first)
    # The MAC share needs sizes: for a model with symbolic inputs, at --shapes or the data's.
    if before.int8_mac_share is None and _symbolic_input(working) is not None:
        if not shapes and calib is not None:
            shapes = dict(_data_shapes(working, calib))
        before = _sized(before, working, trt, target, shapes)
    kept, kept_changes = _keep_float(working, keep_float, where)
    if kept_changes:
        first, types, view = _check(working, trt, target)
    # Nodes kept float on purpose are never re-quantized and their findings are not fixed; they
    # are known by their labels (their names once the preparation has named every node).
    fixable_before = len(_without([node_label(n) for n in kept])(first, fixers))
    prepared = _prepare(working) if fixable_before or not rules else []
    kept_names = sorted(node_label(node) for node in kept)
    fixers_of = _without(kept_names)
    prepared = kept_changes + prepared
    if prepared:
        # Folding a weight path is not a placement repair: say so only when it changed something.
        first, types, view = _check(working, trt, target)
    actions: list[FixAction] = []
    skipped: dict[str, None] = {}
    notes: dict[str, str] = {}  # tensor or weighted op -> why it was left as it is
    calibrated: dict[str, float] = {}
    tried: set[str] = set()  # groups calibration was asked for (one pass each)
    earlier = carried_scales(working, view)  # what the tensors carried before any repair
    rounds = 0
    current = first
    unpaid: dict[str, str] = {}
    judged_changes: list[str] = []
    unweighed = ""
    for judged in (False, True):
        for _ in range(MAX_ROUNDS):
            findings = fixers_of(current, fixers)
            if not findings:
                break
            rounds += 1
            plan = plan_target(working, target=target, extra_scales=calibrated,
                               types=types.types, view=view, exclude=kept_names,
                               earlier_scales=earlier)
            # A round can need a scale the ones before did not (a Q/DQ a repair moved lost the
            # scale it carried): each group is calibrated the first time it is missing.
            uncalibrated = {group: names for group, names in plan.missing.items()
                            if group not in tried}
            if uncalibrated and calib is not None:
                tried.update(uncalibrated)
                calibrated.update(_calibrate(plan, uncalibrated, calib))
                plan = plan_target(working, target=target, extra_scales=calibrated,
                                   types=types.types, view=view, exclude=kept_names,
                                   earlier_scales=earlier)
            for tensors in plan.missing.values():
                reason = (f"no scale for {', '.join(repr(t) for t in tensors[:4])}: nothing next "
                          "to it carries one; give --calib data to compute it")
                skipped[reason] = None
                notes.update((t, reason) for t in tensors)
            notes.update(plan.unscaled)
            session = start_session(working, plan, types=types.types)
            changed = False
            for finding in findings:
                mark = len(session.log)
                unit = fixers[finding.code]
                assert unit.fix is not None
                changed = unit.fix(finding, working) or changed
                actions.append(FixAction(finding.code, rule(finding.code).name, finding.message,
                                         tuple(session.log[mark:])))
            notes.update(session.notes)
            end_session(working)
            current, types, view = _check(working, trt, target, types)
            if not changed:
                break
        left = fixers_of(current, fixers)
        if judged or not left or target != "gpu":
            break
        if not shapes and calib is not None and _symbolic_input(working) is not None:
            shapes = _data_shapes(working, calib)
        timed = _timed_model(working, shapes)  # rule 4
        if timed is None:
            unweighed = (f"input '{_symbolic_input(working)}' has symbolic dimensions: give "
                         "--shapes (or --calib data) to weigh Reformats against INT8 savings")
            break
        region_nodes = _unpaid_regions(timed, trt, left)
        if region_nodes and not _faster_float(timed, trt, region_nodes):
            region_nodes = {}  # the drop would strand its neighbours: the engine gets slower
        region_nodes = region_nodes or _unpaid_entry(timed, trt, left)
        if not region_nodes:
            break
        _, changes = _keep_float(working, sorted(region_nodes), where)
        # The weighted ops are the decision worth recording; their bias Adds and copies follow.
        unpaid = {label: why for label, (op, why) in region_nodes.items() if op in WEIGHTED_OPS}
        record_kept_float(working, {**kept_float(working), **unpaid})
        judged_changes = changes
        kept_names = sorted({*kept_names, *region_nodes})
        fixers_of = _without(kept_names)
        current, types, view = _check(working, trt, target)
    if prepared or judged_changes or any(a.changes for a in actions):
        # New scales and weights are initializers that are not graph inputs: IR version 4 on.
        working.ir_version = max(working.ir_version or 0, _MIN_IR_VERSION)
        drop_orphaned(working.graph, unread_before)  # the removed Q/DQ's scales and zero points
    left = fixers_of(current, fixers)
    unfixed = [Unfixed(f.code, f.message, _why_left(f, notes)) for f in left]
    result = FixResult(
        source=where, output=None if dry_run or out_path is None else str(out_path),
        dry_run=dry_run, trt=trt, target=target, from_model=from_model, rounds=rounds, prepared=prepared,
        actions=actions, skipped=list(skipped), unfixed=unfixed, before=before,
        after=_sized(_figures(current), working, trt, target, shapes),
        fixable_before=fixable_before, fixable_after=len(left),
        model=working, unpaid_float=unpaid, unpaid_changes=judged_changes,
        unweighed=unweighed,
    )
    if out_path is not None and not dry_run:
        protected = (source_path,) if source_path is not None else ()
        with output_set(protected) as outputs:
            if source_path is not None and not result.changed and not _external(working):
                # Nothing changed: the output is the input, byte for byte.
                outputs.stage_bytes(out_path, source_path.read_bytes())
            else:
                stage_model(outputs, working, out_path)
    result.seconds = time.perf_counter() - start
    return result


def _check(model: ir.Model, trt: str, target: str, before: RoundTypes | None = None
           ) -> tuple[LintResult, RoundTypes, QdqView]:
    """``lint`` without the latency comparison (no rule ``fix`` repairs reads it), and the value
    types the prediction used, which planning the target needs too. ``before``: the types of the
    model before a round of repairs, carried over to the round's new Q/DQ (``retype``), so shape
    inference runs once, not once per round. And the model's Q/DQ view, until it changes."""
    types = before.after_round(model) if before is not None else None
    prediction = run_prediction(model, trt=trt, target=target, types=types)
    return (check_prediction(prediction, "", kept=kept_float(model)),
            RoundTypes.of(model, prediction.facts.types), prediction.facts.view)


def _why_left(finding: Finding, notes: Mapping[str, str]) -> str:
    """Why a fixable finding is still there: what was noted of one of its tensors or nodes."""
    for name in (*finding.tensors, *finding.nodes):
        if name in notes:
            return notes[name]
    return "the target placement does not remove it"


def _symbolic_input(model: ir.Model) -> str | None:
    """The first network input with a symbolic or unknown dimension (or no shape at all)."""
    for value in model.graph.inputs:
        if value.name in model.graph.initializers:
            continue
        if value.shape is None or not all(isinstance(d, int) for d in value.shape):
            return value.name or "?"
    return None


def _sized(figures: EngineFigures, model: ir.Model, trt: str, target: str,
           shapes: Mapping[str, Sequence[int]]) -> EngineFigures:
    """``figures`` with the INT8 share of MACs of ``model`` predicted at ``shapes`` when the
    model's own shapes left it unknown."""
    if figures.int8_mac_share is not None or not shapes:
        return figures
    timed = _timed_model(model, shapes)
    if timed is None:
        return figures
    return replace(figures, int8_mac_share=_check(timed, trt, target)[0].summary.int8_mac_share)


def _data_shapes(model: ir.Model, data: DataRequest) -> dict[str, Sequence[int]]:
    """The input shapes of the first batch of ``data``: what the model is deployed on."""
    first = next(iter(data.open(ir.serde.serialize_model(model))), None)
    return {name: tuple(array.shape) for name, array in (first or {}).items()}


def _timed_model(model: ir.Model, shapes: Mapping[str, Sequence[int]]) -> ir.Model | None:
    """What rule 4 times: ``model``, or a copy with ``shapes`` applied; None when an input keeps
    a symbolic dimension (counted as 1, a 640 x 640 detector would be timed on one pixel, where
    no INT8 region pays, and every conv would be kept float)."""
    from qdqkit.linting.latency import apply_shapes

    if shapes:
        model = model.clone()
        apply_shapes(model, shapes)
    return None if _symbolic_input(model) is not None else model


def _unpaid_regions(model: ir.Model, trt: str, left: list[Finding]
                    ) -> dict[str, tuple[str, str]]:
    """Rule 4: the non-Q/DQ nodes of the INT8 regions that do not pay and that a finding in
    ``left`` is a Reformat of: label -> (op type, the reason)."""
    from qdqkit.linting.latency import float_build
    from qdqkit.trt.placement import unpaid_points

    prediction = run_prediction(model, trt=trt)
    named = {node for finding in left for node in finding.nodes}
    reformats = {layer.name for layer in prediction.engine.layers
                 if layer.is_reformat and named.intersection(layer.onnx_nodes)}
    found: dict[str, tuple[str, str]] = {}
    for region in unpaid_points(prediction, float_build(model, trt, types=prediction.facts.types)):
        if reformats.intersection(region.entries):
            for node in region.nodes:
                if not is_qdq(node):
                    found.setdefault(node_label(node), (node.op_type, region.reason))
    return found


def _unpaid_entry(model: ir.Model, trt: str, left: list[Finding]
                  ) -> dict[str, tuple[str, str]]:
    """Rule 4 for one standalone Q a finding in ``left`` names: its readers, when keeping them
    float makes the whole engine predicted faster (``quantization.settle`` rule 4)."""
    from qdqkit.trt.cost_model import estimate_latency
    from qdqkit.trt.placement import standalone_entries

    prediction = run_prediction(model, trt=trt)
    named = {node for finding in left for node in finding.nodes}
    nodes_of = {layer.name: layer.onnx_nodes for layer in prediction.engine.layers
                if layer.is_reformat}
    for entry in standalone_entries(prediction):
        if not named.intersection(nodes_of.get(entry.name, ())):
            continue
        found = {node_label(n): (n.op_type, entry.reason) for n in entry.nodes}
        if _faster_float(model, trt, found, estimate_latency(prediction.engine).total_ms):
            return found
    return {}


def _faster_float(model: ir.Model, trt: str, nodes: Mapping[str, object],
                  base_ms: float | None = None) -> bool:
    """Whether ``model`` with ``nodes`` reading float is predicted faster than as it is."""
    from qdqkit.trt.cost_model import estimate_latency

    if base_ms is None:
        base_ms = estimate_latency(run_prediction(model, trt=trt).engine).total_ms
    trial = model.clone()
    KeepNodesFloat(sorted(nodes))(trial)
    return estimate_latency(run_prediction(trial, trt=trt).engine).total_ms < base_ms


def _external(model: ir.Model) -> bool:
    return any(isinstance(v.const_value, ir.ExternalTensor)
               for v in model.graph.initializers.values())


def _fixers(selected: Sequence[str] | None) -> dict[str, RuleUnit]:
    """The rule units whose fixes run, by code: every fixable rule, or those ``selected``."""
    by_code = {code: unit for unit in units_for("model") if unit.fix is not None
               for r in unit.rules if r.fixable for code in [r.code]}
    if not selected:
        return by_code
    chosen: dict[str, RuleUnit] = {}
    for text in selected:
        found = rule(text)
        if found.code not in by_code:
            raise QdqkitError(f"rule {found.code} ({found.name}) has no fix: 'qdqkit rules' marks "
                              "the fixable ones")
        chosen[found.code] = by_code[found.code]
    return chosen


def _keep_float(model: ir.Model, patterns: list[str], where: str
                ) -> tuple[list[ir.Node], list[str]]:
    """Rule 0: the listed nodes read their inputs in float (``KeepNodesFloat``)."""
    if not patterns:
        return [], []
    keeper = KeepNodesFloat(patterns)
    keeper(model)
    unmatched = [p for p in patterns if not any(matches(n, [p]) for n in keeper.kept)]
    if unmatched:
        raise QdqkitError(f"{where}: no node is named {unmatched[0]!r} (keep-float list); give "
                          "node names, globs or op types as reports list them")
    return keeper.kept, keeper.changes


def _without(kept: list[str]) -> Callable[[LintResult, dict[str, RuleUnit]], list[Finding]]:
    """``_fixable`` without the findings about nodes kept float on purpose."""
    names = frozenset(kept)
    if not names:
        return _fixable

    def fixable(result: LintResult, fixers: dict[str, RuleUnit]) -> list[Finding]:
        # A finding about a kept node, or about a tensor a kept node's fused layer writes (the Q
        # at the boundary back into INT8 is the fallback's price, not a misplacement).
        written_by_kept = {t.name for layer in result.engine.layers
                           if names.intersection(layer.onnx_nodes) for t in layer.outputs}
        return [f for f in _fixable(result, fixers)
                if not (f.nodes and f.nodes[0] in names)
                and not written_by_kept.intersection(f.tensors)]

    return fixable


def _fixable(result: LintResult, fixers: dict[str, RuleUnit]) -> list[Finding]:
    return [f for g in result.groups if g.code in fixers for f in g.findings]


def _figures(result: LintResult) -> EngineFigures:
    kinds = (LayerKind.CONVOLUTION, LayerKind.DECONVOLUTION)
    convs = sum(1 for layer in result.engine.layers if layer.kind in kinds)
    return EngineFigures.of(result.summary, int8_conv_outputs(result.engine), convs)


def _prepare(model: ir.Model) -> list[str]:
    """Rule 1 of the module docstring: the weight-path rewrites, each change described."""
    NameUnnamedNodes()(model)
    changes: list[str] = []
    for rewrite in (FoldDequantizedWeightPath(), FoldBatchNormIntoQuantizedConv(),
                    DequantizeBias(), QuantizeBeforeInputCast()):
        rewrite(model)
        changes.extend(rewrite.changes)
    return changes


def _calibrate(plan: QdqTarget, missing: Mapping[str, Sequence[str]], data: DataRequest
               ) -> dict[str, float]:
    """Scales for ``missing``, groups no tensor or neighbour carries one for (rule 3)."""
    from qdqkit.core.upcast import upcast_float16
    from qdqkit.quantization.calibrate import calibrate_groups

    assert plan.float_model is not None
    model = plan.float_model
    if any(v.dtype == ir.DataType.FLOAT16 for n in model.graph for v in n.outputs):
        # An FP16 remainder (TensorRT 11): its float copy mixes float32 DQ outputs with float16
        # math, which onnxruntime refuses; calibrated in float32, as quantize calibrates.
        model = model.clone()
        upcast_float16(model)
    proto = ir.serde.serialize_model(model)
    batches = data.open(proto)
    calibrated = calibrate_groups(proto, missing, batches, method="max", percentile=99.99)
    return {name: calibrated.group_scales[group] for group, names in missing.items()
            if group in calibrated.group_scales for name in names}


def _load(model: str | os.PathLike[str] | onnx.ModelProto | ir.Model
          ) -> tuple[str, ir.Model, Path | None]:
    if isinstance(model, ir.Model):
        return "<in-memory model>", ir.serde.deserialize_model(ir.serde.serialize_model(model)), None
    if isinstance(model, onnx.ModelProto):
        return "<in-memory model>", ir.serde.deserialize_model(model), None
    path = Path(model)
    return str(path), load_model(path), path


__all__ = ["FixResult", "fix"]
