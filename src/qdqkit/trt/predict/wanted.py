"""Which tensors TensorRT will want in INT8, looking downstream through commuting ops (B1-B5, B7).

A tensor is *wanted at scale s* when every reader is an activation QuantizeLinear with the same
per-tensor INT8 scale ``s``, either directly or behind ops that Q commutes with (MaxPool, copies,
nearest Resize, Concat): TensorRT moves a Q backwards across those ops, so the producer can write INT8
itself. One float reader (or two different scales) and the producer keeps writing float (B5): each
Q then becomes a standalone Reformat. A Concat mixing DQ and float inputs counts as a float reader:
TensorRT computes it in float (C11). Computed once, in reverse topological order.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from qdqkit.core.qdq import QuantParams, is_dequantize, is_quantize
from qdqkit.trt.predict.fusion import GraphFacts
from qdqkit.trt.predict.ops import COMMUTING, is_default_domain


def usable_scale(params: QuantParams | None) -> float | None:
    """The per-tensor INT8 scale of an activation Q/DQ, or None if TensorRT cannot fuse it."""
    if params is None or params.per_channel or params.blocked or not params.int8_compatible:
        return None
    if not params.zero_point_is_zero:
        return None
    # Scale equality is bit equality (B4); float32 is what the builder compares.
    return float(np.float32(params.scalar_scale))


def is_commuting(node: ir.Node) -> bool:
    if not is_default_domain(node):
        return False
    if node.op_type in COMMUTING or node.op_type == "Concat":
        return True
    if node.op_type in ("Resize", "Upsample"):
        mode = node.attributes.get("mode")
        return mode is None or mode.as_string() == "nearest"
    if node.op_type == "Pad":
        mode = node.attributes.get("mode")
        return mode is None or mode.as_string() == "constant"
    return False


def commuting_data_index(node: ir.Node) -> set[int]:
    """Inputs of a commuting op that carry data (not shapes, indices or pads)."""
    if node.op_type == "Concat":
        return set(range(len(node.inputs)))
    return {0}


def _mixes_int8_and_float(concat: ir.Node) -> bool:
    kinds = set()
    for value in concat.inputs:
        producer = value.producer() if value is not None else None
        if value is None or value.const_value is not None:
            continue
        kinds.add(producer is not None and is_dequantize(producer))
    return len(kinds) > 1


def wanted_scales(facts: GraphFacts) -> dict[ir.Value, float | None]:
    wanted: dict[ir.Value, float | None] = {}
    nodes = list(facts.graph)

    def decide(value: ir.Value) -> float | None:
        if value.is_graph_output():
            return None
        scales: set[float | None] = set()
        for use in value.uses():
            node = use.node
            if is_quantize(node) and use.idx == 0:
                scales.add(usable_scale(facts.view.params(node)))
            elif node.op_type == "Concat" and _mixes_int8_and_float(node):
                scales.add(None)  # C11: a mixed Concat is computed in float
            elif is_commuting(node) and use.idx in commuting_data_index(node):
                for out in node.outputs:
                    scales.add(wanted.get(out))
            else:
                scales.add(None)
            if None in scales or len(scales) > 1:
                return None
        return next(iter(scales)) if len(scales) == 1 else None

    for node in reversed(nodes):
        for out in node.outputs:
            wanted[out] = decide(out)
    for value in facts.graph.inputs:
        wanted[value] = decide(value)
    return wanted
