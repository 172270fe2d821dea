"""Insert the planned Q/DQ, then keep only the quantization points that pay (E1, K3).

The placement policy (``trt.placement``) says where TensorRT fuses Q/DQ; whether a point that
cannot fuse is worth its Reformat depends on sizes, so it is judged on the predicted engine of the
model as it will be written (scales and FP16 remainder included):

1. Insert the Q/DQ with their calibrated scales (a Q on the cast copy of a network input
   quantizes the input itself, as ``fix`` does: ``passes.input_cast_qdq``) and, for TensorRT
   11, make the remainder FP16.
2. Predict the engine and the same model built FP16; ``trt.placement.unpaid_points`` names the
   INT8 regions whose Reformats cost more than their INT8 layers save. Their nodes stay float
   (the reason is recorded), the placement is planned again from the float model and the round
   repeats: what changed around the dropped regions is judged in the next round.
3. A round is kept only if its whole engine is predicted faster than the best round before it.
   Each region is judged alone, but dropping one can strand its neighbours: an INT8 region that
   read the dropped one's INT8 output now needs a Reformat of its own, is judged unpaid in turn,
   and the drops cascade (a YOLO11 went from 82 to 25 of 101 convs INT8, and slower). The first
   round that makes the engine slower ends the search, and the best round is the result.
4. Then single standalone Qs: a region that pays as a whole can still hold a small layer
   behind float math whose own Q costs more than it saves (YOLO11's positional-encoding conv,
   read after its attention). For the costliest ``ENTRY_TRIALS`` standalone Qs
   (``trt.placement.standalone_entries``), the layers reading one are kept float, the model is
   placed again, and the change stays if the whole engine is predicted faster (rule 3's test).
5. At most ``ROUNDS`` + ``ENTRY_TRIALS`` predictions; each is linear in the graph. Points only
   disappear, so every remaining point has a calibrated scale (a trial that would need a new
   one is skipped).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import onnx
import onnx_ir as ir

from qdqkit.core.errors import QdqkitError
from qdqkit.passes.input_cast_qdq import QuantizeBeforeInputCast
from qdqkit.passes.insert_qdq import ActivationQdq, InsertQdq, WeightQdq
from qdqkit.trt.placement import Entry, Placement, standalone_entries, unpaid_points

ROUNDS = 4
ENTRY_TRIALS = 8

Planner = Callable[[ir.Model, Mapping[ir.Node, str]], Placement]


@dataclass
class Settled:
    """The quantized model, the placement it carries and what the rounds kept float."""

    model: ir.Model
    placement: Placement
    blocked: dict[ir.Node, str]  # nodes of ``model`` kept float and why (plugins, exclusions...)
    fp32_nodes: dict[str, str]
    rounds: int
    latency_ms: float = math.inf  # predicted for the GPU engine; inf when not judged


def settle(
    proto: onnx.ModelProto,
    first: tuple[ir.Model, Placement, Mapping[ir.Node, str]],
    plan: Planner,
    scales: Mapping[str, float],
    *,
    per_tensor_weights: bool,
    fp16_ranges: Mapping[str, tuple[float, float]] | None,
    trt: str,
    target: str,
    shapes: Mapping[str, list[int]] | None = None,
    judge: bool = True,
) -> Settled:
    """Rules 1-3 of the module docstring. ``first`` is the model parsed from ``proto``, its
    placement and the nodes already kept float; ``plan`` places a fresh parse of ``proto``;
    ``scales`` are by tensor name (a later round's scale groups may be named differently);
    ``shapes`` are the input shapes the engine is judged at (the data's, for symbolic ones);
    without ``judge`` the first placement is kept whole."""

    build = _Builder(proto, plan, scales, per_tensor_weights, fp16_ranges)
    model, placement, blocked = first
    # Nodes are named by position: every round parses ``proto`` again, in the same order.
    floats: dict[int, str] = {i: why for i, n in enumerate(model.graph) if (why := blocked.get(n))}
    rounds = 0
    best: Settled | None = None  # rule 3: the fastest round judged so far
    best_floats: dict[int, str] = {}
    best_index: dict[ir.Node, int] = {}  # positions in ``proto`` of the best model's nodes
    entries: list[Entry] = []
    while True:
        rounds += 1
        nodes = list(model.graph)
        index = {node: i for i, node in enumerate(nodes)}
        uncalibrated = [p for p in placement.points if (p.value.name or "") not in scales]
        before = len(floats)
        for point in uncalibrated:
            readers = point.readers or tuple(use.node for use in point.value.uses())
            for node in readers:
                floats.setdefault(index[node], f"not quantized: its input '{point.value.name}' "
                                  "was not calibrated")
        if uncalibrated and (len(floats) == before or rounds > 2 * ROUNDS):
            raise QdqkitError(f"tensor '{uncalibrated[0].value.name}' could not be calibrated; "
                              "exclude its reader with --exclude")
        fp32_nodes: dict[str, str] = {}
        if not uncalibrated:
            fp32_nodes = build.insert(model, placement)
            if not judge or target != "gpu":
                break
            judged = _judged(model, trt, shapes)
            if best is not None and judged.latency_ms >= best.latency_ms:
                break  # rule 3: this round's drops made the engine slower
            best = Settled(model, placement, dict(blocked), fp32_nodes, rounds,
                           judged.latency_ms)
            best_floats, best_index, entries = dict(floats), index, judged.entries
            if rounds >= ROUNDS:
                break
            unpaid = judged.unpaid
            added = 0
            for node, reason in unpaid.items():
                if node in index and index[node] not in floats:
                    floats[index[node]] = reason
                    added += 1
            if not added:
                break
        model = ir.from_proto(proto)
        nodes = list(model.graph)
        blocked = {nodes[i]: why for i, why in floats.items()}
        placement = plan(model, blocked)
    if best is None:
        return Settled(model, placement, dict(blocked), fp32_nodes, rounds)
    return _single_entries(best, best_floats, best_index, entries, build, trt, shapes)


@dataclass(frozen=True)
class _Builder:
    """Places ``proto`` with given nodes kept float and inserts its Q/DQ (rule 1)."""

    proto: onnx.ModelProto
    plan: Planner
    scales: Mapping[str, float]
    per_tensor_weights: bool
    fp16_ranges: Mapping[str, tuple[float, float]] | None

    def __call__(self, floats: Mapping[int, str]
                 ) -> tuple[ir.Model, Placement, dict[ir.Node, str], dict[str, str]] | None:
        """The placed model, or None when it would need a scale nobody calibrated."""
        model = ir.from_proto(self.proto)
        nodes = list(model.graph)
        blocked = {nodes[i]: why for i, why in floats.items()}
        placement = self.plan(model, blocked)
        if any((p.value.name or "") not in self.scales for p in placement.points):
            return None
        return model, placement, blocked, self.insert(model, placement)

    def insert(self, model: ir.Model, placement: Placement) -> dict[str, str]:
        """Rule 1 on ``model``; the nodes the FP16 remainder keeps FP32, with the reason."""
        InsertQdq(
            [ActivationQdq(p.value, self.scales[p.value.name or ""], p.readers)
             for p in placement.points],
            [WeightQdq(n, per_tensor=self.per_tensor_weights)
             for n in placement.quantized_weighted],
        )(model)
        fp32_nodes: dict[str, str] = {}
        if self.fp16_ranges is not None:
            from qdqkit.passes.float16_remainder import Float16Remainder

            remainder = Float16Remainder(self.fp16_ranges)
            remainder(model)
            fp32_nodes = remainder.kept_fp32
        # A Q on the float16 copy of a float32 network input quantizes the input (B8, A2).
        QuantizeBeforeInputCast()(model)
        return fp32_nodes


def _single_entries(best: Settled, floats: dict[int, str], index: Mapping[ir.Node, int],
                    entries: list[Entry], build: _Builder, trt: str,
                    shapes: Mapping[str, list[int]] | None) -> Settled:
    """Rule 4: keep the readers of single standalone Qs float where the engine gains.
    ``index`` gives the position in ``proto`` of each node ``entries`` name."""
    for entry in entries[:ENTRY_TRIALS]:
        added = {index[n]: entry.reason for n in entry.nodes if n in index and index[n] not in floats}
        if not added:
            continue
        built = build({**floats, **added})
        if built is None:
            continue
        judged = _judged(built[0], trt, shapes)
        if judged.latency_ms < best.latency_ms:
            floats = {**floats, **added}
            best = Settled(*built, best.rounds + 1, judged.latency_ms)
    return best


@dataclass(frozen=True)
class _Judged:
    unpaid: dict[ir.Node, str]  # nodes of INT8 regions that do not pay, with the reason
    entries: list[Entry]  # the standalone Qs, their readers as nodes of the judged model
    latency_ms: float  # the whole engine's, predicted


def _judged(model: ir.Model, trt: str, shapes: Mapping[str, list[int]] | None) -> _Judged:
    """``model``'s engine predicted and judged (rules 2-4), its nodes named as ``model``'s."""
    from qdqkit.linting.latency import apply_shapes, float_build
    from qdqkit.trt.cost_model import estimate_latency
    from qdqkit.trt.predict import run_prediction

    judged = model
    if shapes:
        judged = model.clone()  # the shapes go into a copy; nodes keep their order
        apply_shapes(judged, shapes)
    same = dict(zip(judged.graph, model.graph, strict=True))
    prediction = run_prediction(judged, trt=trt)
    found: dict[ir.Node, str] = {}
    for region in unpaid_points(prediction,
                                float_build(judged, trt, types=prediction.facts.types)):
        for node in region.nodes:
            found.setdefault(same[node], region.reason)
    entries = [Entry(e.name, tuple(same[n] for n in e.nodes), e.cost_ms)
               for e in standalone_entries(prediction)]
    return _Judged(found, entries, estimate_latency(prediction.engine).total_ms)


__all__ = ["ENTRY_TRIALS", "ROUNDS", "Settled", "settle"]
