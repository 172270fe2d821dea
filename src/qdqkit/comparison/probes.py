"""The models a comparison runs, each built from a fresh copy of the user's model.

1. Exposure: the float and the Q/DQ model with the tensors to measure made graph outputs
   (``core.activations.ActivationRunner``: pruned to what is observed, optimizations off).
2. Layer-wise ("local"): every quantized node of the Q/DQ model with its own Q/DQ in front, and each
   activation Q and each other computed input fed the float model's tensor instead of what the
   Q/DQ model computed. One run gives every quantized node's output as if it alone were quantized,
   taken where the engine layer TensorRT fuses it into ends (``fused_layer_ends``): a conv's error
   is what its BatchNormalization and activation make of it. A per-channel gain can multiply the
   error of a channel that INT8 crushed (a depthwise conv whose input channels span 0.1 to 40,
   then a BatchNormalization gain of 50 on the small ones): the conv's own output hides that.
3. What-if: the Q/DQ model with one node, or several, reading its inputs unquantized (the
   activation Q/DQ bypassed, the float model's weight instead of the dequantized one), as if it
   ran FP16, and the nodes left unread removed. Used for numerics and for the predicted engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import onnx
import onnx_ir as ir

from qdqkit.core.activations import keep_only
from qdqkit.core.constants import constant_array, constant_derived_values
from qdqkit.core.qdq import DqSource, QdqView, is_dequantize
from qdqkit.core.qdq_math import dequantize, quantize
from qdqkit.core.upcast import upcast_float16

FLOAT_SUFFIX = "::float"
FOLDED_SUFFIX = "::folded"


def fresh_copy(proto: onnx.ModelProto, *, upcast: bool, fold_weights: bool = False) -> ir.Model:
    """An onnx-ir model of ``proto`` that may be edited freely (fp16 upcast to fp32 if asked).

    ``fold_weights`` replaces every weight's DQ (of an integer constant, or of a Q of a float
    constant) by the float constant it computes, with the spec's arithmetic (``core.qdq_math``):
    the same values, without re-quantizing every weight on every run.
    """
    model = ir.serde.deserialize_model(proto)
    if upcast:
        upcast_float16(model)
    if fold_weights:
        fold_weight_qdq(model)
    return model


def fold_weight_qdq(model: ir.Model) -> int:
    """Fold constant-input Q/DQ chains into float initializers; returns how many DQs folded."""
    graph = model.graph
    view = QdqView(graph)
    outputs = set(graph.outputs)
    folded = 0
    for dq in view.dequantize_nodes:
        out = dq.outputs[0]
        params = view.params(dq)
        if params is None or out in outputs or not out.uses():
            continue
        source = view.dq_source(dq)
        q = view.quantize_of(dq)
        if source == DqSource.QUANTIZE and q is not None and view.is_weight_quantize(q):
            weights = constant_array(q.inputs[0])
            q_params = view.params(q)
            if weights is None or q_params is None:
                continue
            array = dequantize(quantize(weights, q_params), params)
        elif source == DqSource.CONSTANT:
            integers = constant_array(dq.inputs[0])
            if integers is None:
                continue
            array = dequantize(integers, params)
        else:
            continue
        dtype = np.float16 if out.dtype == ir.DataType.FLOAT16 else np.float32
        value = ir.Value(name=f"{out.name}{FOLDED_SUFFIX}", const_value=ir.Tensor(
            np.asarray(array, dtype=dtype)))
        graph.register_initializer(value)
        ir.convenience.replace_all_uses_with(out, value)
        folded += 1
    if folded:
        keep_only(graph, list(graph.outputs))
    return folded


def fused_layer_ends(model: ir.Model, value_pairs: Mapping[str, str]
                     ) -> dict[ir.Node, tuple[str, str]]:
    """Weighted node -> (its predicted layer's last epilogue output, that tensor's float name).

    The epilogue is the predictor's (``trt.predict.fusion``: BatchNormalization, bias and scale
    constants, activations, SiLU), up to and without a residual Add, whose other input would come
    from elsewhere. Nodes whose layer holds nothing after them, or whose end has no float
    counterpart, are left out (measured at their own output).
    """
    from qdqkit.trt.predict.fusion import collect_facts, form_blocks

    facts = collect_facts(model.graph, QdqView(model.graph))
    blocks, _ = form_blocks(facts)
    ends: dict[ir.Node, tuple[str, str]] = {}
    for block in blocks:
        node = block.weighted
        if node is None or len(block.nodes) < 2:
            continue
        end = node.outputs[0]
        for member in block.nodes[1:]:
            if member is block.residual_add:
                break
            end = member.outputs[0]
        float_name = value_pairs.get(end.name or "")
        if end is not node.outputs[0] and float_name:
            ends[node] = (end.name or "", float_name)
    return ends


@dataclass
class LocalModel:
    model: ir.Model
    feeds: dict[str, str]  # local input -> the float model's tensor that feeds it
    graph_inputs: tuple[str, ...]  # original graph inputs still read (fed from the data)
    outputs: dict[str, str]  # quantized node output -> the same name in the local model


def local_model(proto: onnx.ModelProto, nodes: dict[int, str], value_pairs: dict[str, str],
                site_pairs: dict[str, str], *, upcast: bool) -> LocalModel | None:
    """The layer-wise model for the quantized nodes at graph positions ``nodes`` (-> the tensor to
    measure: the node's output or its layer's end, see ``fused_layer_ends``).

    ``site_pairs`` maps each quantized activation to its float tensor, ``value_pairs`` any other
    tensor. A node with a computed input that pairs with nothing is left out.
    """
    model = fresh_copy(proto, upcast=upcast)
    graph = model.graph
    order = list(graph)  # positions count the unfolded graph's nodes
    produced = {v.name: v for n in order for v in n.outputs if v.name}
    fold_weight_qdq(model)
    view = QdqView(graph)
    constants = constant_derived_values(graph)
    feeds: dict[str, str] = {}
    made: dict[str, ir.Value] = {}

    def float_input(value: ir.Value, float_name: str) -> ir.Value:
        name = (value.name or "") + FLOAT_SUFFIX
        if name not in made:
            made[name] = ir.Value(name=name, type=ir.TensorType(value.dtype or ir.DataType.FLOAT))
            graph.inputs.append(made[name])
            feeds[name] = float_name
        return made[name]

    for q in view.activation_quantizers():
        x = q.inputs[0]
        if x is not None and x.name in site_pairs and not x.is_graph_input():
            q.replace_input_with(0, float_input(x, site_pairs[x.name]))
    outputs: list[ir.Value] = []
    for position, output in nodes.items():
        node = order[position]
        ok = True
        for index, value in enumerate(node.inputs):
            if value is None or value in constants or value.is_graph_input():
                continue
            producer = value.producer()
            if producer is not None and is_dequantize(producer):
                continue
            paired = value_pairs.get(value.name or "")
            if paired is None:
                ok = False
                break
            node.replace_input_with(index, float_input(value, paired))
        if ok and output in produced:
            outputs.append(produced[output])
    if not outputs:
        return None
    keep_only(graph, outputs, drop_unread_inputs=True)
    forget_computed_shapes(graph)
    inputs = tuple(v.name or "" for v in graph.inputs if v.name not in feeds)
    used = {v.name for v in graph.inputs}
    return LocalModel(model, {k: v for k, v in feeds.items() if k in used}, inputs,
                      {str(v.name): str(v.name) for v in outputs})


def forget_computed_shapes(graph: ir.Graph) -> None:
    """Drop the shapes the source declared for computed tensors: onnxruntime infers them from the
    inputs, and trusts declared ones when planning its buffers. Some producers name every unknown
    dimension alike ('unk' throughout, as ModelOpt writes), which ties unrelated sizes together
    once a model is cut into pieces and those tensors become its inputs and outputs."""
    for node in graph:
        for value in node.outputs:
            value.shape = None


def what_if_model(proto: onnx.ModelProto, nodes: Mapping[int, Mapping[int, np.ndarray]], *,
                  upcast: bool, fold: bool = False) -> ir.Model:
    """The Q/DQ model with the nodes at the positions ``nodes`` holds reading unquantized inputs
    (FP16 fallback).

    ``nodes`` maps a position to the float model's weight arrays of that node, by input index;
    ``fold`` then folds the other weights' Q/DQ (for running it, not for predicting its engine).
    """
    model = fresh_copy(proto, upcast=upcast)
    graph = model.graph
    view = QdqView(graph)
    order = list(graph)
    for position, float_weights in nodes.items():
        _read_unquantized(graph, view, order[position], float_weights, upcast)
    keep_only(graph, list(graph.outputs))
    if fold:
        fold_weight_qdq(model)
    return model


def _read_unquantized(graph: ir.Graph, view: QdqView, node: ir.Node,
                      float_weights: Mapping[int, np.ndarray], upcast: bool) -> None:
    for index, value in enumerate(node.inputs):
        dq = view.dequantize_producer(value)
        if dq is None:
            continue
        weight = float_weights.get(index)
        if weight is not None:
            array = np.asarray(weight)
            if upcast and array.dtype == np.float16:
                array = array.astype(np.float32)
            elif not upcast and value is not None and value.dtype == ir.DataType.FLOAT16:
                array = array.astype(np.float16)
            init = ir.Value(name=f"{node.name or 'node'}_{index}_float_weight",
                            const_value=ir.Tensor(array))
            graph.register_initializer(init)
            node.replace_input_with(index, init)
            continue
        q = view.quantize_of(dq)
        if q is not None and q.inputs[0] is not None and not view.is_weight_quantize(q):
            node.replace_input_with(index, q.inputs[0])
