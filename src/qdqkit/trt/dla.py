"""DLA placement: which predicted layers run on DLA, in which precision, what falls back (rule I).

Applied to a predicted GPU engine. Each layer is checked against DLA's layer support (I5):
convolutions and fully connected layers with kernels up to 32, strides up to 8 and up to 8192
channels; deconvolutions without groups, dilation or padding; pooling, activations, elementwise,
Concat on the channel axis, resize, softmax, shuffle, slice. Static shapes only, batch <= 4096.
Anything else falls back to the GPU (E6, I7): every GPU<->DLA boundary costs a Reformat.
A dimension that is not a number is a dynamic shape, which DLA rejects, unless the network's
inputs have such dimensions themselves: the build then fixes them with one shape (``--shapes``,
min = opt = max), and the inner dimensions that follow from them are as fixed, so they are not
held against a layer (the lint says once to give the shapes instead, QDQ510). A standalone
Q/DQ conversion of a tensor a GPU layer writes stays on the GPU: implicit INT8 has no Q/DQ layer
to send to DLA between two GPU layers.
DLA has no FP32: float layers run FP16; INT8 comes from scales, which TensorRT <= 10 takes from a
calibration cache, not from Q/DQ (I1, I2) -- so a layer is INT8 on DLA where the Q/DQ graph gives
both sides a scale (what ``qdqkit translate`` writes), FP16 elsewhere.
"""

from __future__ import annotations

import onnx_ir as ir

from qdqkit.trt.engine import EngineGraph, EngineLayer, EngineTensor, LayerKind, Precision
from qdqkit.trt.predict.fusion import GraphFacts
from qdqkit.trt.predict.ops import layer_kind_of

_DLA_KINDS = frozenset({
    LayerKind.CONVOLUTION, LayerKind.DECONVOLUTION, LayerKind.FULLY_CONNECTED, LayerKind.POOLING,
    LayerKind.POINTWISE, LayerKind.ACTIVATION, LayerKind.ELEMENTWISE, LayerKind.CONCATENATION,
    LayerKind.RESIZE, LayerKind.SOFTMAX, LayerKind.SHUFFLE, LayerKind.SLICE, LayerKind.SCALE,
    LayerKind.REFORMAT,
})
_DLA_POINTWISE_OPS = frozenset({
    "Relu", "Sigmoid", "Tanh", "Clip", "LeakyRelu", "PRelu", "Add", "Sum", "Sub", "Mul", "Div", "Max", "Min",
    "Pow", "BatchNormalization", "Abs", "Neg", "Exp", "Sqrt", "Reciprocal", "HardSwish",
    "HardSigmoid",
})


def _ints(node: ir.Node, name: str) -> list[int]:
    attr = node.attributes.get(name)
    return list(attr.as_ints()) if attr is not None else []


def dla_layer_kind(node: ir.Node) -> bool:
    """Whether the layer ``node`` alone becomes is of a kind DLA runs (a MatMul of 3-D tokens
    becomes a MatrixMultiply, which falls back to the GPU); shapes aside (``dla_blocker``)."""
    return layer_kind_of(node) in _DLA_KINDS


def dla_blocker(node: ir.Node, facts: GraphFacts) -> str | None:
    """Why ``node`` cannot run on DLA, or None if it can (I5)."""
    for value in (*node.inputs, *node.outputs):
        shape = facts.shape_of(value) if value is not None else None
        if value is None or facts.is_constant(value) or shape is None:
            continue
        dims = list(shape)
        if any(not isinstance(d, int) for d in dims) and not facts.dynamic_inputs:
            return f"dynamic shape on '{value.name}' (DLA needs static shapes)"
        ints = [d for d in dims if isinstance(d, int)]
        if ints and ints[0] > 4096:
            return f"batch {ints[0]} > 4096"
        if any(d > 8192 for d in ints[1:]):
            return f"a dimension of '{value.name}' exceeds 8192"
    op = node.op_type
    if op in ("Conv", "ConvTranspose"):
        kernel = _ints(node, "kernel_shape")
        if kernel and (len(kernel) != 2 or max(kernel) > 32):
            return f"kernel {kernel} (DLA: 2-D, 1..32)"
        if max(_ints(node, "strides") or [1]) > 8:
            return "stride > 8"
        if op == "ConvTranspose":
            group = node.attributes.get("group")
            if (group is not None and group.as_int() != 1) or max(_ints(node, "dilations") or [1]) > 1:
                return "grouped or dilated deconvolution"
            if any(_ints(node, "pads")):
                return "padded deconvolution"
    if op in ("Gemm", "MatMul") and not facts.is_constant(node.inputs[1]):
        return "matrix multiply without a constant second input"
    if op == "Concat":
        axis = node.attributes.get("axis")
        if axis is None or axis.as_int() not in (1, -3):
            return "Concat not on the channel axis"
    return None


def place_on_dla(engine: EngineGraph, facts: GraphFacts, trt: str) -> None:
    engine.target = "dla"
    nodes = {node.name: node for node in facts.graph if node.name}
    placed: list[EngineLayer] = []
    device_of_tensor: dict[str, str] = {t.name: "GPU" for t in engine.inputs}
    network_inputs = frozenset(device_of_tensor)
    for layer in engine.layers:
        blocker = _layer_blocker(layer, nodes, facts)
        source = layer.inputs[0].name if layer.inputs else None
        if (blocker is None and layer.origin == "QDQ" and source not in network_inputs
                and device_of_tensor.get(source or "") == "GPU"):
            # Implicit INT8 has no Q/DQ layer: the conversion of a tensor a GPU layer writes
            # happens on the GPU, not in a DLA submission of its own between two GPU layers.
            blocker = "a Q/DQ conversion runs on the device that writes its input"
        if trt == "11":
            blocker = blocker or "TensorRT 11.0-11.3 has no DLA; 11.4.1 needs a strongly typed FP16 build"
        if blocker is None:
            layer.device = "DLA"
            for tensor in (*layer.inputs, *layer.outputs):
                if tensor.precision in (Precision.FP32, Precision.BF16):
                    tensor.precision = Precision.FP16
            if layer.origin == "QDQ":
                layer.notes.append("on DLA the scale comes from the calibration cache (I1)")
        else:
            layer.device = "GPU"
            layer.notes.append(f"falls back to GPU: {blocker} (I5, I7)")
        for tensor in layer.inputs:
            if device_of_tensor.get(tensor.name, layer.device) != layer.device:
                placed.append(_boundary(tensor, device_of_tensor[tensor.name], layer.device))
        placed.append(layer)
        for tensor in layer.outputs:
            device_of_tensor[tensor.name] = layer.device
    engine.layers = placed


def _layer_blocker(layer: EngineLayer, nodes: dict[str, ir.Node], facts: GraphFacts) -> str | None:
    if layer.kind not in _DLA_KINDS:
        return f"{layer.kind.value} layers are not supported on DLA"
    for name in layer.onnx_nodes:
        node = nodes.get(name)
        if node is None or node.op_type in ("QuantizeLinear", "DequantizeLinear"):
            continue
        if layer.kind == LayerKind.POINTWISE and node.op_type not in _DLA_POINTWISE_OPS:
            return f"{node.op_type} is not a DLA pointwise op"
        reason = dla_blocker(node, facts)
        if reason is not None:
            return f"{name}: {reason}"
    return None


def _boundary(tensor: EngineTensor, source: str, target: str) -> EngineLayer:
    return EngineLayer(
        name=f"Reformatting {source}->{target} for {tensor.name}",
        kind=LayerKind.REFORMAT,
        inputs=[EngineTensor(tensor.name, tensor.precision)],
        outputs=[EngineTensor(f"{tensor.name} ({target})", tensor.precision)],
        origin="layout",
        device=target,
        notes=["GPU<->DLA boundary: a reformat and a separate submission (E6, I7)"],
    )
