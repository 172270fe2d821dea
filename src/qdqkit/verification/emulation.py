"""The emulation model: the translated model computing what TensorRT's implicit INT8 computes.

Rules, one per source of loss (``Source``); an emulation applies any subset of them, so each
source's cost can be measured alone:
1. ``ACTIVATIONS``: every tensor the calibration cache gives a scale is fake-quantized there
   (Q -> DQ, int8, symmetric, round half to even), except a scale of exactly 1.0, the DLA unary
   marker, which the DLA compiler reads as "no requantization". A network input is the
   exception to "every reader": the engine takes it in float (the build's default I/O format)
   and its layers quantize it as they read it, but an If or Loop body, whose layers carry no
   cached scale, reads it as given (as the Q/DQ model's body does).
2. ``WEIGHTS``: the weight of every INT8 layer (Conv, ConvTranspose, Gemm, MatMul whose activation
   input has a scale, unless ``--layerPrecisions`` pins it to FP16 or FP32) becomes what TensorRT
   computes with: per output channel, scale max|w|/127 in float32
   (``core.qdq_math.trt_requantize_weight``; a weight already on that grid is unchanged).
3. ``FP16``: every float tensor left without a scale is rounded to float16 (Cast -> Cast), and so
   are the constant float inputs of the layers that read them (a weight computed by a
   DequantizeLinear of constants too): those layers run FP16 on the device.
4. The reference gets rule 3 too, at the same tensors (``reference_names`` finds them in the Q/DQ
   model: the same name, else the same output of the node with the same name). An ``--int8
   --fp16`` build of the Q/DQ model runs its unquantized layers FP16 as well, so that rounding is
   not something the translation changed: on one side only, each rounding moves values across
   the rounding points of every quantizer after it, and the comparison would measure INT8 noise
   (a few dB above the model's own INT8 loss) instead of the translation.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

import numpy as np
import onnx_ir as ir

from qdqkit.core.lazy_proto import release_mapped_tensor
from qdqkit.core.names import taken_names, unique_name
from qdqkit.core.qdq import FLOAT_TYPES, WEIGHTED_OPS, is_qdq
from qdqkit.core.qdq_math import trt_requantize_weight
from qdqkit.core.weights import output_channel_axis, weight_index
from qdqkit.passes.insert_qdq import ActivationQdq, InsertQdq


class Source(enum.Enum):
    """Where an implicit-INT8 engine departs from the Q/DQ model."""

    ACTIVATIONS = "activation scales as cached"
    WEIGHTS = "weight requantization (max|w|/127)"
    FP16 = "layers pinned to FP16"


ALL_SOURCES = frozenset(Source)


def fake_quantize_weight(w: np.ndarray, axis: int) -> np.ndarray:
    """TensorRT's implicit weight quantization: per output channel, scale max|w|/127 (float32)."""
    return trt_requantize_weight(w, axis)[0].astype(w.dtype, copy=False)


def quantize_weights(graph: ir.Graph, scaled: set[str],
                     float_layers: frozenset[str] = frozenset()) -> tuple[int, int]:
    """Requantize the weights of weighted ops whose activation has a scale, as TensorRT does,
    except in the layers the bundle pins to FP16 or FP32 (``float_layers``), which keep theirs.

    Returns (weights requantized, of which changed by requantization).
    """
    done: set[ir.Value] = set()
    changed = 0
    for node in graph:
        if node.op_type not in WEIGHTED_OPS or node.name in float_layers:
            continue
        index = weight_index(node, lambda i: _is_initializer(node.inputs[i]))  # noqa: B023
        if index is None:
            continue
        x, w = node.inputs[1 - index], node.inputs[index]
        if x is None or x.name not in scaled or w is None or w.const_value is None or w in done:
            continue
        original = w.const_value
        array = original.numpy()
        if array.ndim == 0 or not np.issubdtype(array.dtype, np.floating):
            continue
        axis = output_channel_axis(node, index, array.ndim) % array.ndim
        requantized, moved = trt_requantize_weight(array, axis)
        if moved.any():
            changed += 1
            w.const_value = ir.Tensor(requantized.astype(array.dtype, copy=False), name=w.name)
        elif isinstance(original, ir.ExternalTensor):
            # Read once here; the session gets this copy and the file is unmapped now, so its
            # pages are not held twice.
            w.const_value = ir.Tensor(np.array(array), name=w.name)
        del array, requantized
        release_mapped_tensor(original)
        done.add(w)
    return len(done), changed


def _is_initializer(value: ir.Value | None) -> bool:
    return value is not None and value.const_value is not None


def values_by_name(graph: ir.Graph) -> dict[str, ir.Value]:
    by_name: dict[str, ir.Value] = {v.name: v for v in graph.inputs if v.name}
    for node in graph:
        for out in node.outputs:
            if out.name:
                by_name[out.name] = out
    return by_name


def insert_fake_quant(model: ir.Model, scales: Mapping[str, float]) -> list[str]:
    """Q -> DQ (int8, zero point 0) after every tensor named in ``scales``; returns names not found."""
    graph = model.graph
    by_name = values_by_name(graph)
    missing = [name for name in scales if name not in by_name]
    InsertQdq([ActivationQdq(by_name[name], scale, _quantized_readers(graph, by_name[name]))
               for name, scale in scales.items() if name in by_name])(model)
    return missing


def _quantized_readers(graph: ir.Graph, value: ir.Value) -> tuple[ir.Node, ...] | None:
    """Rule 1: the readers a network input is quantized for, those of the main graph (None:
    every reader of any other tensor, which its INT8 writer stores quantized)."""
    if not value.is_graph_input():
        return None
    return tuple(dict.fromkeys(use.node for use in value.uses() if use.node.graph is graph))


def reference_names(
    translated: ir.Graph, reference: ir.Graph, tensors: Iterable[str]
) -> tuple[list[str], list[str]]:
    """Rule 4: the reference's names for the translated ``tensors``, and the tensors it lacks."""
    tensors = list(tensors)
    found = reference_name_map(translated, reference, tensors)
    return [found[n] for n in tensors if n in found], [n for n in tensors if n not in found]


def reference_name_map(
    translated: ir.Graph, reference: ir.Graph, tensors: Iterable[str]
) -> dict[str, str]:
    """The reference's name of each translated tensor it has a counterpart of.

    The translation keeps tensor names (a folded BatchNormalization's output passes to its conv);
    with renamed node outputs the node that wrote the tensor still has its name."""
    in_reference = values_by_name(reference)
    translated_values = values_by_name(translated)
    nodes = {node.name: node for node in reference if node.name}
    found: dict[str, str] = {}
    for name in tensors:
        if name in in_reference:
            found[name] = name
            continue
        value = translated_values.get(name)
        producer = value.producer() if value is not None else None
        index = value.index() if value is not None else None
        twin = nodes.get(producer.name or "") if producer is not None else None
        if producer is not None and twin is not None and twin.op_type == producer.op_type \
                and index is not None and index < len(twin.outputs) and twin.outputs[index].name:
            found[name] = twin.outputs[index].name or ""
    return found


def round_to_fp16(graph: ir.Graph, tensors: Iterable[str]) -> int:
    """Rule 3: round the named float tensors, and the float constants their readers take (a
    dequantized constant weight included), to float16."""
    by_name = values_by_name(graph)
    taken = taken_names(graph)  # node names too: a translated FP16 model has Cast nodes of its own
    rounded: set[ir.Value] = set()
    count = 0
    for name in tensors:
        value = by_name.get(name)
        if value is None or value in rounded or value.dtype not in FLOAT_TYPES \
                or value.dtype == ir.DataType.FLOAT16:
            continue
        for reader in dict.fromkeys(use.node for use in value.uses()):
            if is_qdq(reader):  # its scale and zero point are the quantizer's, not a layer's
                continue
            for operand in reader.inputs:
                if operand is None or operand in rounded:
                    continue
                if operand.const_value is not None:
                    _round_constant(operand)
                    rounded.add(operand)
                elif _dequantized_constant(operand) and operand.dtype == ir.DataType.FLOAT:
                    _insert_round_trip(graph, operand, taken)
                    rounded.add(operand)
        _insert_round_trip(graph, value, taken)
        rounded.add(value)
        count += 1
    return count


def _dequantized_constant(value: ir.Value) -> bool:
    """A weight behind Q/DQ: DequantizeLinear of a constant, or of a QuantizeLinear of one."""
    producer = value.producer()
    if producer is None or producer.op_type != "DequantizeLinear":
        return False
    source = producer.inputs[0]
    quantize = source.producer() if source is not None else None
    if quantize is not None and quantize.op_type == "QuantizeLinear":
        source = quantize.inputs[0]
    return source is not None and source.const_value is not None


def _round_constant(value: ir.Value) -> None:
    tensor = value.const_value
    assert tensor is not None
    if tensor.dtype not in FLOAT_TYPES or tensor.dtype == ir.DataType.FLOAT16:
        return
    array = tensor.numpy()
    value.const_value = ir.Tensor(array.astype(np.float16).astype(array.dtype), name=value.name)


def _insert_round_trip(graph: ir.Graph, value: ir.Value, taken: set[str]) -> None:
    base = value.name or "tensor"
    dtype = value.dtype
    assert dtype is not None
    half = ir.Node("", "Cast", [value], [ir.AttrInt64("to", ir.DataType.FLOAT16)],
                   outputs=[ir.Value(name=unique_name(taken, f"{base}_fp16"))],
                   name=unique_name(taken, f"{base}_to_fp16"))
    back = ir.Node("", "Cast", [half.outputs[0]], [ir.AttrInt64("to", dtype)],
                   outputs=[ir.Value(name=unique_name(taken, f"{base}_rounded"))],
                   name=unique_name(taken, f"{base}_from_fp16"))
    result = back.outputs[0]
    result.dtype, result.shape = dtype, value.shape
    for use in list(value.uses()):
        if use.node is not half:
            use.node.replace_input_with(use.idx, result)
    producer = value.producer()
    if producer is not None:
        graph.insert_after(producer, [half, back])
    else:
        graph.insert_before(next(iter(graph)), [half, back])
    if value.is_graph_output():
        # The graph output is what the FP16 layer wrote: the rounded value, under its own name.
        name = value.name
        value.name = unique_name(taken, f"{base}_before_fp16")
        result.name = name
        outputs = graph.outputs
        for position, output in enumerate(list(outputs)):
            if output is value:
                outputs[position] = result
