"""The refusals: what implicit INT8 cannot carry, checked before anything is rewritten.

TensorRT's implicit INT8 has one symmetric, per-tensor, 8-bit scale per activation tensor, and
computes weight scales itself. So we refuse: non-zero activation zero points, per-channel activation
scales, int4/fp8/int16/blocked Q/DQ (policy: refuse the model and name every such node, rather than
silently dequantize part of it), scales computed at run time (including onnxruntime's dynamic
quantization), Q outputs read by anything but a DQ, and DQs of computed integer tensors. int32 DQ
on constants (biases) are fine: they fold to float.
"""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

from qdqkit.core.errors import UnsupportedModelError
from qdqkit.core.qdq import (
    DYNAMIC_QUANTIZATION_OPS,
    DqSource,
    QdqView,
    dtype_label,
    is_dequantize,
    is_quantize,
    node_label,
)

_MAX_LISTED = 5


def _names(nodes: list[ir.Node]) -> str:
    labels = [f"'{node_label(n)}'" for n in nodes[:_MAX_LISTED]]
    more = f" and {len(nodes) - _MAX_LISTED} more" if len(nodes) > _MAX_LISTED else ""
    return ", ".join(labels) + more


def _activation_nodes(
    view: QdqView, constants: set[ir.Value], sources: dict[ir.Node, DqSource]
) -> list[ir.Node]:
    """The Q/DQ of activations: a Q of a computed tensor, a DQ of such a Q's output or of a
    graph input. Each Q is judged once; its DQs take its answer."""
    active_qs = {
        q for q in view.quantize_nodes
        if not view.is_weight_quantize(q) and q.inputs[0] not in constants
    }
    activations = [q for q in view.quantize_nodes if q in active_qs]
    for dq in view.dequantize_nodes:
        source = sources[dq]
        if source == DqSource.QUANTIZE:
            if view.quantize_of(dq) in active_qs:
                activations.append(dq)
        elif source == DqSource.GRAPH_INPUT:
            activations.append(dq)
    return activations


_CONTROL_FLOW = frozenset({"If", "Loop", "Scan", "SequenceMap"})


def check_graph_ops(graph: ir.Graph, where: str) -> None:
    """Refuse Q/DQ inside control-flow bodies and dynamic quantization, from one walk over the
    graph's nodes (the first refusal is the Q/DQ in a body, as when checked one after the
    other)."""
    control_flow: list[ir.Node] = []
    dynamic: list[ir.Node] = []
    for node in graph:
        op_type = node.op_type
        if op_type in _CONTROL_FLOW:
            control_flow.append(node)
        elif op_type in DYNAMIC_QUANTIZATION_OPS:
            dynamic.append(node)
    _check_no_qdq_in_bodies(control_flow, where)
    _check_not_dynamic(dynamic, where)


def _check_no_qdq_in_bodies(control_flow: list[ir.Node], where: str) -> None:
    """Q/DQ inside If/Loop bodies would survive translation; refuse rather than leave them."""
    for node in control_flow:
        for attr in node.attributes.values():
            bodies = [attr.value] if attr.type == ir.AttributeType.GRAPH else (
                list(attr.value) if attr.type == ir.AttributeType.GRAPHS else [])
            for body in bodies:
                inner = [n for n in ir.traversal.RecursiveGraphIterator(body)
                         if is_quantize(n) or is_dequantize(n)]
                if inner:
                    raise UnsupportedModelError(
                        f"{where}: {node.op_type} '{node_label(node)}' has Q/DQ inside its body "
                        f"(e.g. '{node_label(inner[0])}'); translate only handles the main graph"
                    )


def _check_not_dynamic(found: list[ir.Node], where: str) -> None:
    """A dynamically quantized model has no activation scales at all: say so, by name."""
    if found:
        kinds = ", ".join(sorted({n.op_type for n in found}))
        raise UnsupportedModelError(
            f"{where}: the model uses onnxruntime dynamic quantization ({kinds}: {_names(found)}), "
            "whose activation scales are computed at run time, so there are no scales to "
            "translate; quantize the float model statically in QDQ format instead"
        )


def check_translatable(view: QdqView, where: str, constants: set[ir.Value]) -> list[str]:
    """Raise UnsupportedModelError for what implicit INT8 cannot carry; return warnings."""
    check_graph_ops(view.graph, where)
    if view.qdq_count == 0:
        raise UnsupportedModelError(
            f"{where}: the model has no QuantizeLinear/DequantizeLinear nodes, so there are no "
            "scales to translate; quantize it first"
        )
    unreadable = view.unreadable()
    if unreadable:
        raise UnsupportedModelError(
            f"{where}: Q/DQ {_names(unreadable)} have scales or zero points computed at run time; "
            "fold them to constants first"
        )
    nodes = view.quantize_nodes + view.dequantize_nodes
    # Where each DQ's input comes from, asked by three of the checks below.
    sources = {dq: view.dq_source(dq) for dq in view.dequantize_nodes}
    wrong_type = []
    for n in nodes:
        params = view.params(n)
        assert params is not None
        bias_like = (
            n in sources and params.quant_dtype == ir.DataType.INT32
            and sources[n] == DqSource.CONSTANT
        )
        if not params.int8_compatible and not bias_like:
            wrong_type.append(n)
    if wrong_type:
        kinds = sorted({_kind(view, n) for n in wrong_type})
        raise UnsupportedModelError(
            f"{where}: Q/DQ {_names(wrong_type)} use {', '.join(kinds)}, which TensorRT implicit "
            "INT8 cannot carry (it has only per-tensor 8-bit activation scales); keep this model on "
            "explicit quantization or re-quantize those tensors to int8"
        )
    bad_scales = _bad_scales(view, nodes)
    if bad_scales:
        first = view.params(bad_scales[0])
        shown = first.scale.reshape(-1)[:4].tolist() if first is not None else "?"
        raise UnsupportedModelError(
            f"{where}: Q/DQ {_names(bad_scales)} have NaN, infinite, negative or (on a Q) zero "
            f"scales (e.g. {shown}); a scale must be finite and positive, so the quantizer that "
            "wrote them needs fixing (re-export or re-calibrate)"
        )
    activations = _activation_nodes(view, constants, sources)
    per_channel = [n for n in activations if view.params(n).per_channel]  # type: ignore[union-attr]
    if per_channel:
        raise UnsupportedModelError(
            f"{where}: Q/DQ {_names(per_channel)} quantize activations per channel; implicit INT8 "
            "has one scale per tensor, so re-quantize those activations per tensor"
        )
    nonzero = [n for n in activations if not view.params(n).zero_point_is_zero]  # type: ignore[union-attr]
    if nonzero:
        raise UnsupportedModelError(
            f"{where}: Q/DQ {_names(nonzero)} have non-zero zero points; TensorRT INT8 is "
            "symmetric, so re-quantize with symmetric activations (e.g. onnxruntime "
            "extra_options={'ActivationSymmetric': True} with QInt8)"
        )
    _check_structure(view, where, sources)
    return [
        f"'{node_label(n)}' quantizes to uint8 (0..255); its cache scale is scale * 255 / 127, "
        "the int8 scale with the same range (half the resolution for non-negative values)"
        for n in activations
        if is_quantize(n) and _explicit_uint8(view, n)
    ]


def _bad_scales(view: QdqView, nodes: list[ir.Node]) -> list[ir.Node]:
    """Q/DQ whose scale is NaN, infinite or negative, or zero on a Q (a Q divides by it; a DQ of
    an all-zero weight channel may carry 0 harmlessly). A Q and its DQ share one scale array,
    so each array is checked once."""
    facts: dict[int, tuple[bool, bool]] = {}  # id(scale array): (invalid, has a zero)
    bad = []
    for node in nodes:
        params = view.params(node)
        if params is None:
            continue
        fact = facts.get(id(params.scale))
        if fact is None:
            fact = facts[id(params.scale)] = _scale_facts(params.scale)
        if fact[0] or (fact[1] and is_quantize(node)):
            bad.append(node)
    return bad


def _scale_facts(array: np.ndarray) -> tuple[bool, bool]:
    """(any NaN, infinite or negative value, any zero) of a scale array."""
    if array.size == 1:  # per-tensor: plain float tests, a fraction of numpy's per-call cost
        value = float(array.reshape(-1)[0])
        return not math.isfinite(value) or value < 0, value == 0
    if array.size == 0:
        return False, False
    # Two reductions answer all three questions: a NaN makes both NaN, an infinity shows at
    # one end, and once the smallest value is not negative it is zero only if some value is.
    scale = array.astype(np.float64)
    low, high = float(scale.min()), float(scale.max())
    return not (math.isfinite(low) and math.isfinite(high)) or low < 0, low == 0


def _explicit_uint8(view: QdqView, node: ir.Node) -> bool:
    params = view.params(node)
    return (
        params is not None and params.quant_dtype == ir.DataType.UINT8 and params.zero_point is not None
    )


def _kind(view: QdqView, node: ir.Node) -> str:
    params = view.params(node)
    assert params is not None
    if params.blocked:
        return f"blocked {dtype_label(params.quant_dtype)}"
    return dtype_label(params.quant_dtype)


def _check_structure(view: QdqView, where: str, sources: dict[ir.Node, DqSource]) -> None:
    for q in view.quantize_nodes:
        out = q.outputs[0]
        readers = [u.node for u in out.uses() if not is_dequantize(u.node)]
        if readers or out.is_graph_output():
            what = f"'{node_label(readers[0])}'" if readers else "a graph output"
            raise UnsupportedModelError(
                f"{where}: QuantizeLinear '{node_label(q)}' feeds {what} directly, not a "
                "DequantizeLinear; an integer tensor cannot be expressed in implicit INT8"
            )
        params = view.params(q)
        for dq in view.dequantizers_of(q):
            dq_params = view.params(dq)
            assert params is not None and dq_params is not None
            # A Q and its DQ reading one scale tensor share one array (QdqView reads each once;
            # NaN scales were refused above, so the same array is an equal one).
            same = dq_params.scale is params.scale or (
                dq_params.scale.shape == params.scale.shape
                and np.array_equal(dq_params.scale.astype(np.float64),
                                   params.scale.astype(np.float64))
            )
            if not same:
                raise UnsupportedModelError(
                    f"{where}: QuantizeLinear '{node_label(q)}' and DequantizeLinear "
                    f"'{node_label(dq)}' use different scales; a pair must share one scale"
                )
    for dq in view.dequantize_nodes:
        source = sources[dq]
        if source == DqSource.OTHER:
            raise UnsupportedModelError(
                f"{where}: DequantizeLinear '{node_label(dq)}' reads a computed integer tensor; "
                "only Q->DQ pairs, integer constants and integer graph inputs can be translated"
            )
        if source == DqSource.GRAPH_INPUT:
            x = dq.inputs[0]
            assert x is not None
            if any(not is_dequantize(u.node) for u in x.uses()):
                raise UnsupportedModelError(
                    f"{where}: graph input '{x.name}' is read both through DequantizeLinear "
                    f"'{node_label(dq)}' and directly; it cannot become a float input"
                )
