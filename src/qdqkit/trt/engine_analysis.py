"""Facts about an engine that the report, the drawing and the diff all need."""

from __future__ import annotations

from dataclasses import dataclass, field

from qdqkit.trt.engine import EngineGraph, EngineLayer, LayerKind, Precision


def is_copy_node(layer: EngineLayer) -> bool:
    """A layout copy TensorRT inserted itself (a Reformat, or a NoOp named like one)."""
    return layer.name.startswith("Reformatting CopyNode")


def precision_signature(layer: EngineLayer) -> str:
    """``INT8`` when inputs and outputs agree, else ``INT8+FP16 → FP16`` (inputs → output).

    A single compute precision hides the case that matters most for INT8 speed: a fused
    Conv+Add reading an INT8 activation and a float skip tensor, and writing float.
    """
    ins = list(dict.fromkeys(t.precision.value for t in layer.inputs))
    outs = list(dict.fromkeys(t.precision.value for t in layer.outputs))
    if not ins and not outs:
        return Precision.UNKNOWN.value
    if ins == outs and len(ins) == 1:
        return ins[0]
    return f"{'+'.join(ins) or '?'} → {'+'.join(outs) or '?'}"


def int8_conv_outputs(graph: EngineGraph) -> int:
    """Convolutions (and deconvolutions) that write a quantized tensor: the K2 regression count."""
    kinds = (LayerKind.CONVOLUTION, LayerKind.DECONVOLUTION)
    return sum(
        1 for layer in graph.layers
        if layer.kind in kinds and layer.output_precision.is_quantized
    )


def quantized_io(layer: EngineLayer) -> str:
    """``INT8+float -> INT8``: which inputs and outputs are quantized, whatever the float type."""
    ins = "+".join("INT8" if t.precision.is_quantized else "float" for t in layer.inputs) or "-"
    outs = "+".join("INT8" if t.precision.is_quantized else "float" for t in layer.outputs) or "-"
    return f"{ins} -> {outs}"


def layout_only(layer: EngineLayer) -> bool:
    """A layer that only changes layout (a non-Q/DQ Reformat or a NoOp): builds differ on these."""
    return (layer.is_reformat and layer.origin != "QDQ") or layer.kind == LayerKind.NOOP


@dataclass
class Topology:
    """Data-flow edges between layers, by index into ``graph.layers``.

    Edges follow tensor names (producer -> consumer). Names-only exports have no tensors, so their
    layers are chained in execution order, which is what such an export can honestly show.
    """

    preds: list[list[int]]
    succs: list[list[int]]
    edge_precision: dict[tuple[int, int], Precision] = field(default_factory=dict)
    graph_inputs: dict[int, list[str]] = field(default_factory=dict)  # layer -> network inputs read


def topology(graph: EngineGraph) -> Topology:
    n = len(graph.layers)
    preds: list[list[int]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    edge_precision: dict[tuple[int, int], Precision] = {}
    graph_inputs: dict[int, list[str]] = {}
    has_tensors = any(layer.inputs or layer.outputs for layer in graph.layers)
    if not has_tensors:
        for i in range(1, n):
            preds[i].append(i - 1)
            succs[i - 1].append(i)
        return Topology(preds, succs, edge_precision, graph_inputs)
    network_inputs = {t.name for t in graph.inputs}
    producer: dict[str, int] = {}
    for i, layer in enumerate(graph.layers):
        for tensor in layer.inputs:
            j = producer.get(tensor.name)
            if j is None:
                if tensor.name in network_inputs:
                    graph_inputs.setdefault(i, []).append(tensor.name)
                continue
            if j != i and j not in preds[i]:
                preds[i].append(j)
                succs[j].append(i)
                edge_precision[(j, i)] = tensor.precision
        for tensor in layer.outputs:
            # A later write of the same name (loops) starts a new version of the tensor.
            producer[tensor.name] = i
    return Topology(preds, succs, edge_precision, graph_inputs)


def latency_sum(layers: list[EngineLayer]) -> float | None:
    """Summed latency, rounded to nanoseconds so float noise never shows up in reports."""
    times = [layer.latency_ms for layer in layers if layer.latency_ms is not None]
    return round(sum(times), 6) if times else None
