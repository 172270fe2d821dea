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
4. At most ``ROUNDS`` predictions; each round is linear in the graph. Points only disappear, so
   every remaining point has a calibrated scale.
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
from qdqkit.trt.placement import Placement, unpaid_points

ROUNDS = 4

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

    model, placement, blocked = first
    # Nodes are named by position: every round parses ``proto`` again, in the same order.
    floats: dict[int, str] = {i: why for i, n in enumerate(model.graph) if (why := blocked.get(n))}
    rounds = 0
    best: Settled | None = None  # rule 3: the fastest round judged so far
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
            _insert(model, placement, scales, per_tensor_weights)
            if fp16_ranges is not None:
                from qdqkit.passes.float16_remainder import Float16Remainder

                remainder = Float16Remainder(fp16_ranges)
                remainder(model)
                fp32_nodes = remainder.kept_fp32
            # A Q on the float16 copy of a float32 network input quantizes the input (B8, A2).
            QuantizeBeforeInputCast()(model)
            if not judge or target != "gpu":
                break
            unpaid, latency_ms = _judged(model, trt, shapes)
            if best is not None and latency_ms >= best.latency_ms:
                return best  # rule 3: this round's drops made the engine slower
            best = Settled(model, placement, dict(blocked), fp32_nodes, rounds, latency_ms)
            if rounds >= ROUNDS:
                break
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
    return best if best is not None else Settled(model, placement, dict(blocked), fp32_nodes,
                                                 rounds)


def _judged(model: ir.Model, trt: str, shapes: Mapping[str, list[int]] | None
            ) -> tuple[dict[ir.Node, str], float]:
    """The nodes of ``model`` in INT8 regions that do not pay, each with the reason, and the
    predicted latency of its whole engine in ms."""
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
    for region in unpaid_points(prediction, float_build(judged, trt)):
        for node in region.nodes:
            found.setdefault(same[node], region.reason)
    return found, estimate_latency(prediction.engine).total_ms


def _insert(model: ir.Model, placement: Placement, scales: Mapping[str, float],
            per_tensor_weights: bool) -> None:
    InsertQdq(
        [ActivationQdq(p.value, scales[p.value.name or ""], p.readers) for p in placement.points],
        [WeightQdq(n, per_tensor=per_tensor_weights) for n in placement.quantized_weighted],
    )(model)


__all__ = ["ROUNDS", "Settled", "settle"]
