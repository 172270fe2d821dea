"""Which quantization points pay for themselves in the predicted engine (E1, E2, K3).

``unpaid_points(prediction, fp16_engine)`` judges a placed Q/DQ model by the latency cost model
(``trt.cost_model``) on one GPU:

1. INT8 layers joined by INT8 tensors (a Q fused into its producer, a DQ absorbed by its reader,
   elided copies and Concats between) form an INT8 region. A region is entered through Qs that
   cannot fuse into their producer (E1: Reformats) and left through DQs no reader absorbs (E2).
2. A region pays when its layers save more against the FP16 build of the same ONNX nodes than its
   Reformats cost. One that does not is an ``Unpaid``: its nodes stay float and the caller places
   again without it. Judging whole regions, not single Qs, sees that a Q feeding a chain of INT8
   layers that all end in float is a loss, while one in front of a backbone is not.
3. ``int8_saving`` and ``reformat_time`` answer the same question for one float layer, so lint
   can tell a weighted op kept float because INT8 would not pay from one simply left out.
4. ``standalone_entries`` lists the Qs that enter INT8 as Reformats of their own (a network
   input's excepted: some layer must quantize it) with the layers reading them: the candidates
   for keeping just those layers float when their region as a whole pays (a small conv behind
   float math in a large INT8 network), to be judged on the whole engine's latency.
Fused Q/DQ cost nothing. Shapes are the model's (symbolic dimensions count as 1, as in lint).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import onnx_ir as ir

from qdqkit.core.qdq import is_qdq
from qdqkit.trt.cost_model import estimate_latency, time_layer
from qdqkit.trt.engine import EngineGraph, EngineLayer, EngineTensor, LayerKind, Precision
from qdqkit.trt.gpus import DEFAULT_GPU, Gpu, find_gpu
from qdqkit.trt.predict import Prediction


@dataclass(frozen=True)
class Unpaid:
    """An INT8 region whose Reformats cost more than its INT8 layers save."""

    entries: tuple[str, ...]  # the standalone Q/DQ layers of the region
    nodes: tuple[ir.Node, ...]  # the ONNX nodes of its layers: they stay float
    cost_ms: float
    saving_ms: float

    @property
    def loss_ms(self) -> float:
        return self.cost_ms - self.saving_ms

    @property
    def reason(self) -> str:
        named = ", ".join(f"'{e}'" for e in self.entries[:2])
        more = f" and {len(self.entries) - 2} more" if len(self.entries) > 2 else ""
        return (f"not quantized: its INT8 region needs the standalone Q/DQ {named}{more} "
                f"(Reformats of {self.cost_ms * 1e3:.2f} us) and saves {self.saving_ms * 1e3:.2f}"
                " us against FP16 (E1, E2)")


def unpaid_points(prediction: Prediction, fp16_engine: EngineGraph,
                  gpu: Gpu | str = DEFAULT_GPU) -> list[Unpaid]:
    """The INT8 regions of ``prediction``'s model that do not pay (rules 1-2), largest loss first."""
    device = find_gpu(gpu) if isinstance(gpu, str) else gpu
    layers = prediction.engine.layers
    times = [t.time_ms for t in estimate_latency(prediction.engine, device).layers]
    fp16_by_node: dict[str, tuple[int, float]] = {}
    for index, (layer, timed) in enumerate(zip(
            fp16_engine.layers, estimate_latency(fp16_engine, device).layers, strict=True)):
        for name in layer.onnx_nodes:
            fp16_by_node.setdefault(name, (index, timed.time_ms))
    int8 = [i for i, layer in enumerate(layers) if not layer.is_reformat and _int8(layer)]
    parent = {i: i for i in int8}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    writers = {t.name: i for i in int8 for t in layers[i].outputs if t.precision.is_quantized}
    for i in int8:
        for tensor in layers[i].inputs:
            j = writers.get(tensor.name)
            if tensor.precision.is_quantized and j is not None:
                parent[find(i)] = find(j)
    by_tensor: dict[str, list[int]] = {}
    for i in int8:
        for tensor in (*layers[i].inputs, *layers[i].outputs):
            by_tensor.setdefault(tensor.name, []).append(i)
    cost: dict[int, float] = {}
    entries: dict[int, list[str]] = {}
    for index, layer in enumerate(layers):
        if not (layer.is_reformat and layer.origin == "QDQ"):
            continue
        touched = {find(i) for t in (*layer.inputs, *layer.outputs)
                   for i in by_tensor.get(t.name, ())}
        for root in touched:  # a Reformat between two regions is charged to both
            cost[root] = cost.get(root, 0.0) + times[index]
            entries.setdefault(root, []).append(layer.name)
    members: dict[int, list[int]] = {}
    for i in int8:
        members.setdefault(find(i), []).append(i)
    nodes_of = _nodes_by_layer(prediction)
    found = []
    for root, spent in cost.items():
        saving = sum(_saved(layers[i], times[i], fp16_by_node) for i in members[root])
        if saving > spent:
            continue
        nodes = tuple(n for i in members[root] for n in nodes_of.get(id(layers[i]), ()))
        found.append(Unpaid(tuple(entries[root]), nodes, spent, saving))
    found.sort(key=lambda u: (-u.loss_ms, u.entries))
    return found


@dataclass(frozen=True)
class Entry:
    """A standalone Q entering INT8 and the ONNX nodes of the INT8 layers that read it."""

    name: str
    nodes: tuple[ir.Node, ...]
    cost_ms: float

    @property
    def reason(self) -> str:
        return (f"not quantized: it would need the standalone Q '{self.name}' (a Reformat of "
                f"{self.cost_ms * 1e3:.2f} us), and the engine is predicted faster with it "
                "float (E1)")


def standalone_entries(prediction: Prediction, gpu: Gpu | str = DEFAULT_GPU) -> list[Entry]:
    """Rule 4: the standalone Qs of ``prediction``'s engine and their readers, costliest
    first."""
    device = find_gpu(gpu) if isinstance(gpu, str) else gpu
    layers = prediction.engine.layers
    network_inputs = {t.name for t in prediction.engine.inputs}
    readers: dict[str, list[EngineLayer]] = {}
    for layer in layers:
        if not layer.is_reformat:
            for tensor in layer.inputs:
                if tensor.precision.is_quantized:
                    readers.setdefault(tensor.name, []).append(layer)
    nodes_of = _nodes_by_layer(prediction)
    found = []
    for layer in layers:
        if not (layer.is_reformat and layer.origin == "QDQ" and layer.inputs and layer.outputs):
            continue
        source, result = layer.inputs[0], layer.outputs[0]
        if (source.precision.is_quantized or not result.precision.is_quantized
                or source.name in network_inputs):
            continue
        nodes = tuple(n for r in readers.get(result.name, ()) for n in nodes_of.get(id(r), ()))
        if nodes:
            found.append(Entry(layer.name, nodes, time_layer(layer, device).time_ms))
    found.sort(key=lambda e: (-e.cost_ms, e.name))
    return found


def int8_saving(layer: EngineLayer, gpu: Gpu | str = DEFAULT_GPU) -> float:
    """What a float compute ``layer`` would save in INT8 (inputs and MACs INT8), in ms."""
    device = find_gpu(gpu) if isinstance(gpu, str) else gpu
    as_int8 = dataclasses.replace(
        layer, inputs=[dataclasses.replace(t, precision=Precision.INT8) if i == 0 else t
                       for i, t in enumerate(layer.inputs)],
        cost=dataclasses.replace(layer.cost, int8_compute=True) if layer.cost else None)
    return time_layer(layer, device).time_ms - time_layer(as_int8, device).time_ms


def reformat_time(tensor: EngineTensor, gpu: Gpu | str = DEFAULT_GPU) -> float:
    """The time of a Reformat quantizing ``tensor`` (float -> INT8), in ms."""
    device = find_gpu(gpu) if isinstance(gpu, str) else gpu
    reformat = EngineLayer(name=f"{tensor.name} (Quantize)", kind=LayerKind.REFORMAT,
                           inputs=[tensor],
                           outputs=[dataclasses.replace(tensor, precision=Precision.INT8)])
    return time_layer(reformat, device).time_ms


def _int8(layer: EngineLayer) -> bool:
    if layer.cost is not None and layer.cost.int8_compute:
        return True
    return layer.precision.is_quantized or any(
        t.precision.is_quantized for t in (*layer.inputs, *layer.outputs))


def _saved(layer: EngineLayer, time_ms: float, fp16_by_node: dict[str, tuple[int, float]]) -> float:
    fp16 = dict(fp16_by_node[n] for n in layer.onnx_nodes if n in fp16_by_node)
    return sum(fp16.values()) - time_ms if fp16 else 0.0


def _nodes_by_layer(prediction: Prediction) -> dict[int, list[ir.Node]]:
    found: dict[int, list[ir.Node]] = {}
    for node in prediction.facts.graph:
        if is_qdq(node) or node in prediction.facts.folded_nodes:
            continue
        layer = prediction.layer_of(node)
        if layer is not None and not layer.is_reformat:
            found.setdefault(id(layer), []).append(node)
    return found


__all__ = ["Entry", "Unpaid", "int8_saving", "reformat_time", "standalone_entries",
           "unpaid_points"]
