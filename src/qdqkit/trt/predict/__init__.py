"""Predict the engine TensorRT builds from a Q/DQ ONNX model, without a GPU.

``predict_engine(model, trt=..., target=...)`` returns the same ``EngineGraph`` the engine reader
makes from a real ``trtexec --exportLayerInfo`` export, so a prediction and a real engine can be
diffed. Three steps, each linear in the graph size: group nodes into fused layers (``fusion``), find
the tensors TensorRT wants in INT8 (``wanted``), then walk the graph deciding precisions and the
Reformat layers that appear (``walk``). ``target="dla"`` then places layers on DLA or GPU (``dla``).

TensorRT 8.6 and 10 are predicted as built weakly typed with INT8 and FP16 (``--best``):
unquantized layers run FP16. TensorRT 11 networks are strongly typed: unquantized layers run in the
model's own float type, so an FP32 model keeps an FP32 remainder.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property

import onnx_ir as ir

from qdqkit.core.errors import QdqkitError
from qdqkit.core.model_io import load_model
from qdqkit.core.qdq import QdqView
from qdqkit.core.shapes import ValueTypes, infer_value_types
from qdqkit.trt.engine import EngineGraph, EngineLayer, EngineTensor, LayerCost, Precision
from qdqkit.trt.predict.fusion import Block, GraphFacts, collect_facts, form_blocks
from qdqkit.trt.predict.state import Int8Tensor
from qdqkit.trt.predict.walk import PrecisionWalk
from qdqkit.trt.predict.wanted import wanted_scales
from qdqkit.trt.versions import TARGETS, normalize_trt_version
from qdqkit.trt.versions import TRT_VERSIONS as TRT_VERSIONS


@dataclass
class Prediction:
    """The predicted engine, the facts behind it, and the questions checks may ask of it.

    Read-only: the queries answer from what the walk recorded; nothing here changes the engine or
    the model.
    """

    engine: EngineGraph
    facts: GraphFacts
    blocks: list[Block]
    trt: str
    target: str
    _walk: PrecisionWalk = field(repr=False)

    @property
    def strongly_typed(self) -> bool:
        return self.trt == "11"

    def block_of(self, node: ir.Node) -> Block | None:
        """The fused block ``node`` belongs to (Q/DQ nodes belong to none)."""
        return self._walk.block_of.get(node)

    def block_layer(self, block: Block) -> EngineLayer | None:
        """The engine layer ``block`` became (None for an elided Concat or copy)."""
        return self._walk.layer_of_block.get(block)

    def layer_of(self, node: ir.Node) -> EngineLayer | None:
        """The engine layer that holds ``node``: its Reformat, the layer that absorbed it, its block's."""
        walk = self._walk
        if node in walk.qdq_layer:
            return walk.qdq_layer[node]
        if node in walk.absorbed_into:
            return walk.absorbed_into[node]
        block = walk.block_of.get(node)
        return walk.layer_of_block.get(block) if block is not None else None

    def reformat_of(self, qdq_node: ir.Node) -> EngineLayer | None:
        """The standalone Reformat layer a Q or DQ node became, if it did not fuse."""
        return self._walk.qdq_layer.get(qdq_node)

    def requantizes_for(self, concat: ir.Node) -> list[EngineLayer]:
        """The Reformats that requantize a Concat's inputs to its output scale (C11)."""
        return list(self._walk.requantize_for.get(concat, []))

    def int8_of(self, value: ir.Value | None) -> Int8Tensor | None:
        """How ``value`` exists in the engine in INT8 (tensor and scale), or None if it does not."""
        return self._walk.int8_of(value)

    def producer_layer(self, value: ir.Value) -> EngineLayer | None:
        """The layer that writes ``value`` (after elided copies)."""
        return self._walk.producer_layer.get(self._walk.resolve(value))

    def wanted_scale(self, value: ir.Value) -> float | None:
        """The INT8 scale every reader of ``value`` quantizes it with, or None (wanted.py)."""
        return self._walk.wanted.get(value)

    def external_inputs(self, block: Block) -> list[ir.Value]:
        """The computed values ``block`` reads from outside itself."""
        return self._walk.external_inputs(block)

    def shape_of(self, value: ir.Value) -> ir.Shape | None:
        """``value``'s shape: declared, inferred, or an initializer's own."""
        return self.facts.shape_of(value)

    def cost_of(self, layer: EngineLayer) -> LayerCost | None:
        """MACs and INT8-ness of a predicted weighted layer; None for other layers."""
        return layer.cost

    @cached_property
    def _qdq_reformats_by_input(self) -> dict[str, list[EngineLayer]]:
        # Built once, so asking per finding stays linear in the engine's size.
        index: dict[str, list[EngineLayer]] = {}
        for layer in self.engine.layers:
            if layer.origin == "QDQ":
                for name in dict.fromkeys(t.name for t in layer.inputs):
                    index.setdefault(name, []).append(layer)
        return index

    def reformats_reading(self, layer: EngineLayer) -> list[EngineLayer]:
        """Q/DQ Reformat layers that read one of ``layer``'s outputs, in engine order."""
        found: dict[int, EngineLayer] = {}
        for tensor in layer.outputs:
            for other in self._qdq_reformats_by_input.get(tensor.name, []):
                found.setdefault(id(other), other)
        return list(found.values())




def run_prediction(
    model: ir.Model | str | os.PathLike[str], *, trt: str = "8.6", target: str = "gpu",
    types: ValueTypes | None = None,
) -> Prediction:
    """The engine TensorRT ``trt`` would build for ``target``, and the facts behind it.

    ``types`` are the model's inferred value types when the caller already has them (a caller
    that only moved Q/DQ since inferring them); otherwise ONNX inference runs.
    """
    version = normalize_trt_version(trt)
    target = str(target).strip().lower()
    if target not in TARGETS:
        raise QdqkitError(f"unknown target '{target}': use 'gpu' or 'dla'")
    if not isinstance(model, ir.Model):
        path = os.fspath(model)
        model = load_model(path)
        source = path
    else:
        source = "predicted"
    graph = model.graph
    view = QdqView(graph)
    # Shapes come back as a table: predicting never writes into the caller's model.
    facts = collect_facts(graph, view, types if types is not None else infer_value_types(model),
                          generic_epilogues=target != "dla", implicit_scales=target == "dla")
    blocks, block_of = form_blocks(facts)
    wanted = wanted_scales(facts)
    walk = PrecisionWalk(facts, block_of, wanted, strongly_typed=version == "11")
    walk.run(graph)
    engine = EngineGraph(
        layers=walk.layers,
        inputs=[walk.float_of(v) for v in graph.inputs],
        outputs=[_output_tensor(walk, v) for v in graph.outputs],
        source="predicted",
        trt_version=version,
        target="gpu",
        metadata={
            "model": source,
            "builder": "weakly typed, INT8+FP16 (--best)" if version != "11" else "strongly typed",
            "elided_nodes": walk.elided,
            "quantized": view.qdq_count > 0,
        },
    )
    if target == "dla":
        from qdqkit.trt.dla import place_on_dla

        place_on_dla(engine, facts, version)
    return Prediction(engine, facts, blocks, version, target, walk)


def _output_tensor(walk: PrecisionWalk, value: ir.Value) -> EngineTensor:
    resolved = walk.resolve(value)
    if resolved in walk.floats:
        tensor = walk.floats[resolved]
        return EngineTensor(value.name or "?", tensor.precision, None, tensor.shape)
    return EngineTensor(value.name or "?", Precision.INT8)


def predict_engine(
    model: ir.Model | str | os.PathLike[str], *, trt: str = "8.6", target: str = "gpu"
) -> EngineGraph:
    """The engine TensorRT ``trt`` would build from ``model`` for ``target`` ("gpu" or "dla")."""
    return run_prediction(model, trt=trt, target=target).engine


__all__ = ["Prediction", "predict_engine", "run_prediction"]
