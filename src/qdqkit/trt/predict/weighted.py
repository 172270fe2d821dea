"""The two decisions with the most consequences: a weighted op's fused layer and a Concat.

``weighted_layer`` applies C1 (DQ -> weighted op -> Q is INT8 in and out), A8 (weight Q/DQ folds
into the layer), C12 (Pad folds), C3/C4 (the residual input decides the fused output precision)
and C10 (an INT8 MaxPool joins the conv as ConvActPool). ``concat_layer`` applies C11: an INT8
Concat is elided when every input already has the output's scale, each other input is requantized,
and a mix of INT8 and float inputs dequantizes them all.
"""

from __future__ import annotations

import onnx_ir as ir

from qdqkit.core.qdq import is_qdq, node_label
from qdqkit.trt.engine import EngineTensor, LayerCost, Precision
from qdqkit.trt.predict.fusion import Block
from qdqkit.trt.predict.ops import layer_kind_of
from qdqkit.trt.predict.state import Int8Tensor, WalkState


def _weight_is_int8(block: Block) -> bool:
    ref = block.weight
    if ref is None or ref.dequantize is None or ref.params is None:
        return False
    params = ref.params
    return params.int8_compatible and not params.blocked


def weighted_layer(walk: WalkState, block: Block) -> None:
    node = block.weighted
    assert node is not None
    ref = block.weight
    names: list[str] = []
    if ref is not None:
        # TensorRT 8.x names a fused conv 'W + QuantizeLinear_i + Conv_j ...' with the weight's
        # name first; keeping it makes predicted and real layers pair up by their stable names.
        names.append(ref.source.name or "weight")
        if ref.quantize is not None:
            names.append(node_label(ref.quantize))
    if block.pad is not None:
        names.append(node_label(block.pad))
    # Inner ranges of an implicit build (fusion rule 1) belong to the layer but not to its name,
    # which TensorRT builds from the translated model's nodes.
    names += [node_label(n) for n in block.nodes if not is_qdq(n)]
    layer = walk.new_layer(block, layer_kind_of(node), names)
    layer.onnx_nodes += [node_label(n) for n in (*block.nodes, *block.folded)
                         if node_label(n) not in layer.onnx_nodes]
    activation = block.activation_input()
    source = walk.int8_of(activation)
    weight_int8 = _weight_is_int8(block)
    int8 = source is not None and weight_int8
    if activation is None:
        layer.notes.append("no computed input")
    elif int8:
        assert source is not None
        walk.take_int8(layer, activation, source)
        layer.notes.append("activation through DQ and weight through Q/DQ: INT8 kernel (C1, A8)")
    else:
        layer.inputs.append(walk.float_of(activation))
        if source is None and weight_int8:
            layer.notes.append("the weight is quantized but the activation is float: runs float (D1)")
        elif source is not None:
            layer.notes.append("the activation is quantized but the weight is float: runs float (D1)")
        else:
            layer.notes.append("not quantized: runs float")
    if block.pad is not None:
        layer.notes.append(f"{node_label(block.pad)} folds into the convolution (C12)")

    residual = block.residual_input
    out_value = block.output
    want = walk.wanted.get(out_value)
    residual_int8 = walk.int8_of(residual) if residual is not None else None
    out_int8 = int8 and want is not None and (residual is None or residual_int8 is not None)
    if residual is not None:
        add = node_label(block.residual_add) if block.residual_add is not None else "Add"
        if residual_int8 is not None and out_int8:
            walk.take_int8(layer, residual, residual_int8)
            layer.notes.append(f"{add}: residual input INT8, fused output INT8 (C3)")
        else:
            layer.inputs.append(walk.float_of(residual))
            if residual_int8 is not None:
                layer.notes.append(
                    f"{add}: residual input INT8 but nothing after the block is quantized: the "
                    "residual is dequantized and the block writes float (C4)"
                )
            else:
                layer.notes.append(
                    f"{add}: residual input '{residual.name}' is float, so the fused block writes "
                    "float and the next Q cannot fuse (C3)"
                )
    pool = block.pool_candidate
    if out_int8 and pool is not None and walk.wanted.get(pool.outputs[0]) == want:
        block.nodes.append(pool)
        walk.absorbed_pools.add(pool)
        layer.onnx_nodes.append(node_label(pool))
        layer.name += f" + {node_label(pool)}"
        layer.type_name = "ConvActPool"
        layer.notes.append(f"{node_label(pool)} joins the INT8 convolution (ConvActPool, C10)")
    if out_int8:
        layer.notes.append("every reader quantizes with one scale: the Q fuses, INT8 output (C1)")
    weight_value = ref.source if ref is not None and not ref.path else None
    macs = walk.macs(node, weight_value)
    layer.cost = LayerCost(macs=macs, int8_compute=int8)
    walk.finish(block, layer, want, out_int8)


def concat_layer(walk: WalkState, node: ir.Node) -> None:
    inputs = [v for v in node.inputs if v is not None]
    sources = [walk.int8_of(v) for v in inputs]
    out = node.outputs[0]
    want = walk.wanted.get(out)
    walk.elided.append(node_label(node))
    walk.producer_layer.pop(out, None)
    if inputs and all(s is not None for s in sources):
        scales = {s.scale for s in sources if s is not None}
        target = want if want is not None else (next(iter(scales)) if len(scales) == 1 else None)
        if target is not None:
            for value, source in zip(inputs, sources, strict=False):
                assert source is not None
                if source.scale != target:
                    dq = value.producer()
                    label = node_label(dq) if dq is not None else (value.name or "?")
                    requantize = walk.reformat(
                        f"{label} (requantize for {node_label(node)})", [label],
                        EngineTensor(source.engine_name, Precision.INT8),
                        EngineTensor(f"{value.name} (requantized)", Precision.INT8),
                        f"Concat input scale {source.scale!r} differs from {target!r} (C11, E3)",
                    )
                    walk.requantize_for.setdefault(node, []).append(requantize)
            walk.int8[out] = Int8Tensor(out.name or "?", target)
            for value in inputs:  # the DQs vanish: producers write into the Concat's buffer
                dq = value.producer()
                if dq is not None and dq.op_type == "DequantizeLinear" and dq not in walk.qdq_layer:
                    walk.elided.append(node_label(dq))
            return
    for value in inputs:
        walk.float_of(value)
    tensor = EngineTensor(out.name or "?", walk.float_precision(out))
    walk.floats[out] = tensor

