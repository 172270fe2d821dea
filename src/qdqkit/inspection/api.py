"""``qdqkit inspect``: what a model's quantization looks like, in one read.

Reports the opset and producer, node counts, the Q/DQ spelling the producer used, quantized types,
per-tensor vs per-channel granularity, zero-point problems, and for every weighted op whether both
its activation and its weight arrive through DQ (so TensorRT can run it INT8), with the share of
multiply-accumulates that would run INT8.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence

import onnx_ir as ir

from qdqkit.core.constants import constant_source
from qdqkit.core.macs import macs_of
from qdqkit.core.model_io import load_model
from qdqkit.core.qdq import (
    DYNAMIC_QUANTIZATION_OPS,
    DqSource,
    QdqView,
    QuantParams,
    dtype_label,
    is_quantize,
    node_label,
)
from qdqkit.core.shapes import ValueTypes, apply_input_shapes, infer_value_types
from qdqkit.core.validation import validate_model
from qdqkit.inspection.result import InspectResult, WeightedOpInfo, ZeroPointProblem


def _scale_spelling(value: ir.Value | None) -> str:
    if value is None:
        return "missing"
    if value.const_value is not None:
        return "initializer"
    producer = value.producer()
    if producer is None:
        return "graph input"
    if producer.op_type == "Constant":
        return "Constant node"
    if producer.op_type in ("Identity", "Cast") and constant_source(value) is not None:
        return f"behind {producer.op_type}"
    return "computed"


_BIAS_INPUT = {"Conv": 2, "ConvTranspose": 2, "Gemm": 2}


def _feeds_bias(value: ir.Value | None) -> bool:
    """Whether a (dequantized) tensor is read as a bias: Conv/ConvTranspose/Gemm input 2."""
    return value is not None and any(
        _BIAS_INPUT.get(use.node.op_type) == use.idx for use in value.uses()
    )


def _role(view: QdqView, node: ir.Node, params: QuantParams) -> str:
    if is_quantize(node):
        if not view.is_weight_quantize(node):
            return "activation"
        dqs = view.dequantizers_of(node)
        return "bias" if any(_feeds_bias(dq.outputs[0]) for dq in dqs) else "weight"
    source = view.dq_source(node)
    if source is DqSource.CONSTANT:
        bias = params.quant_dtype == ir.DataType.INT32 or _feeds_bias(node.outputs[0])
        return "bias" if bias else "weight"
    q = view.quantize_of(node)
    if q is not None and view.is_weight_quantize(q):
        return "bias" if _feeds_bias(node.outputs[0]) else "weight"
    return "activation"


def _granularity(view: QdqView, node: ir.Node) -> str:
    params = view.params(node)
    if params is None:
        return "unreadable"
    if params.blocked:
        return f"blocked(axis={params.axis},block={params.block_size})"
    if params.per_channel:
        return f"per-channel(axis={params.axis})"
    return "per-tensor"


def inspect_model(
    model_or_path: ir.Model | str | os.PathLike[str],
    *,
    shapes: Mapping[str, Sequence[int]] | None = None,
) -> InspectResult:
    """Inspect a model; ``shapes`` (input name -> full shape) fixes dynamic dimensions for MACs."""
    path = "" if isinstance(model_or_path, ir.Model) else os.fspath(model_or_path)
    if isinstance(model_or_path, ir.Model):
        model = model_or_path
        validate_model(model, "model")
    else:
        model = load_model(model_or_path, validate=True)
    where = path or "model"
    graph = model.graph
    view = QdqView(graph)
    assumed = _apply_shapes(model, shapes or {}, where)

    styles: Counter[str] = Counter()
    quant_types: Counter[str] = Counter()
    scale_types: Counter[str] = Counter()
    granularity: Counter[str] = Counter()
    zp_problems: list[ZeroPointProblem] = []

    for q in view.quantize_nodes:
        params = view.params(q)
        role = _role(view, q, params) if params is not None else "activation"
        on_input = q.inputs[0] is not None and q.inputs[0].is_graph_input()
        if not on_input:  # counted once, as "Q on a graph input" below
            styles[f"Q on {role}"] += 1
        if len(q.inputs) < 3 or q.inputs[2] is None:
            styles["Q without zero point"] += 1
        dqs = view.dequantizers_of(q)
        if len(dqs) > 1:
            styles["Q feeding several DQs"] += 1
        if q.inputs[0] is not None and q.inputs[0].is_graph_input():
            styles["Q on a graph input"] += 1
        producer = q.inputs[0].producer() if q.inputs[0] is not None else None
        if producer is not None and producer.op_type == "DequantizeLinear":
            styles["DQ -> Q requantize"] += 1
    for dq in view.dequantize_nodes:
        source = view.dq_source(dq)
        params = view.params(dq)
        if source is DqSource.CONSTANT:
            is_int32 = params is not None and params.quant_dtype == ir.DataType.INT32
            if is_int32:
                styles["int32 bias DQ"] += 1
            elif _feeds_bias(dq.outputs[0]):
                styles["DQ-only integer bias"] += 1
            else:
                styles["DQ-only integer weight"] += 1
        elif source is DqSource.GRAPH_INPUT:
            styles["DQ on a graph input"] += 1
        elif source is DqSource.OTHER:
            styles["DQ on a computed integer tensor"] += 1
    for node in (*view.quantize_nodes, *view.dequantize_nodes):
        params = view.params(node)
        scale_types[
            f"scale as {_scale_spelling(node.inputs[1] if len(node.inputs) > 1 else None)}"
        ] += 1
        if params is None:
            continue
        quant_types[dtype_label(params.quant_dtype)] += 1
        scale_types[f"{dtype_label(params.scale_dtype)} scales"] += 1
        role = _role(view, node, params)
        granularity[f"{role} {_granularity(view, node)}"] += 1
        # A DQ fed by a Q repeats its Q's zero point: report each quantized tensor once.
        paired_dq = not is_quantize(node) and view.dq_source(node) is DqSource.QUANTIZE
        if params.zero_point is not None and not params.zero_point_is_zero and not paired_dq:
            tensor = node.inputs[0].name if node.inputs[0] is not None else "?"
            zp_problems.append(
                ZeroPointProblem(
                    node_label(node),
                    tensor or "?",
                    f"zero point {params.zero_point.reshape(-1)[:4].tolist()} "
                    f"({dtype_label(params.quant_dtype)}); TensorRT needs symmetric (zero) zero points",
                )
            )

    dynamic = Counter(n.op_type for n in graph if n.op_type in DYNAMIC_QUANTIZATION_OPS)
    types = infer_value_types(model)
    weighted = [_weighted_info(view, node, types) for node in view.weighted_nodes]
    total = sum(w.macs for w in weighted if w.macs)
    int8 = sum(w.macs for w in weighted if w.macs and w.runs == "INT8")
    opsets = {(k or "ai.onnx"): v for k, v in sorted(model.opset_imports.items())}
    return InspectResult(
        path=path,
        ir_version=model.ir_version,
        opsets=opsets,
        producer=" ".join(p for p in (model.producer_name, model.producer_version) if p) or "-",
        node_count=len(graph),
        op_counts=dict(
            sorted(Counter(n.op_type for n in graph).items(), key=lambda kv: (-kv[1], kv[0]))
        ),
        quantize_count=len(view.quantize_nodes),
        dequantize_count=len(view.dequantize_nodes),
        styles=dict(sorted(styles.items())),
        quant_types=dict(sorted(quant_types.items())),
        scale_types=dict(sorted(scale_types.items())),
        granularity=dict(sorted(granularity.items())),
        zero_point_problems=zp_problems,
        unreadable_qdq=[node_label(n) for n in view.unreadable()],
        weighted_ops=weighted,
        int8_mac_share=(int8 / total) if total else None,
        total_macs=total or None,
        dynamic_quantization=dict(sorted(dynamic.items())),
        assumed_dims=assumed,
    )


def _apply_shapes(model: ir.Model, shapes: Mapping[str, Sequence[int]], where: str) -> list[str]:
    """Write the given input shapes into ``model`` (ours, just loaded); name the dims left dynamic.

    MACs count a dynamic dimension as 1; the result says which ones that was.
    """
    apply_input_shapes(model, shapes, where)
    assumed: list[str] = []
    for value in model.graph.inputs:
        name = value.name or ""
        if name in shapes or name in model.graph.initializers:
            continue
        if value.shape is None:
            assumed.append(f"{name}: shape unknown")
            continue
        for axis, dim in enumerate(value.shape):
            if not isinstance(dim, int) or dim <= 0:
                label = getattr(dim, "value", None) or f"axis {axis}"
                assumed.append(f"{name}.{label}=1")
    return assumed


def _weighted_info(view: QdqView, node: ir.Node, types: ValueTypes) -> WeightedOpInfo:
    w_index = view.weight_index(node)
    ref = view.weight_ref(node, w_index) if w_index is not None else None
    a_index = view.activation_index(node)
    act_q = a_index is not None and view.input_is_dequantized(node, a_index)
    if ref is None:
        style, gran = "computed", "-"
        w_shape: tuple[int, ...] | None = None
    else:
        style = ref.style
        gran = "-"
        if ref.dequantize is not None:
            gran = _granularity(view, ref.dequantize)
        w_shape = None
        if not ref.path and ref.source.shape is not None:
            w_shape = tuple(d if isinstance(d, int) else 1 for d in ref.source.shape)
    quantized = bool(act_q and ref is not None and ref.quantized)
    act_value = node.inputs[a_index] if act_q and a_index is not None else None
    act_dq = act_value.producer() if act_value is not None else None
    act_type = _type_label(view.params(act_dq)) if act_dq is not None else None
    weight_type = _type_label(ref.params) if ref is not None and ref.quantized else None
    if quantized and act_type == weight_type:
        runs = act_type or "float"
    elif quantized:
        runs = f"{act_type} x {weight_type} weight"
    else:
        runs = f"float ({weight_type} weight)" if weight_type and not act_q else "float"
    return WeightedOpInfo(
        name=node_label(node),
        op_type=node.op_type,
        quantized=quantized,
        activation_quantized=act_q,
        weight_style=style,
        weight_granularity=gran,
        macs=macs_of(node, w_shape, shape_of=types.shape_of),
        runs=runs,
    )


_TYPE_LABELS = {"int8": "INT8", "uint8": "INT8", "int4": "INT4", "uint4": "UINT4",
                "float8e4m3fn": "FP8", "float8e5m2": "FP8 (E5M2)", "float4e2m1": "FP4"}


def _type_label(params: QuantParams | None) -> str | None:
    """INT8, FP8, INT4 or FP4 as TensorRT names them; None when unknown."""
    if params is None:
        return None
    name = dtype_label(params.quant_dtype)
    return _TYPE_LABELS.get(name, name.upper())
