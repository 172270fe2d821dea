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

import math
import os
from dataclasses import dataclass

import onnx
import onnx_ir as ir

from qdqkit.core.errors import QdqkitError
from qdqkit.core.model_io import load_model
from qdqkit.core.qdq import QdqView
from qdqkit.trt.engine import EngineGraph, EngineTensor, Precision
from qdqkit.trt.predict.fusion import Block, GraphFacts, collect_facts, form_blocks
from qdqkit.trt.predict.walk import PrecisionWalk
from qdqkit.trt.predict.wanted import wanted_scales
from qdqkit.trt.versions import TARGETS, normalize_trt_version
from qdqkit.trt.versions import TRT_VERSIONS as TRT_VERSIONS

_KEEP_INITIALIZER_ELEMENTS = 64  # shape tensors and scalars keep their values


@dataclass
class Prediction:
    """The predicted engine plus the facts behind it, for the lint checks."""

    engine: EngineGraph
    facts: GraphFacts
    blocks: list[Block]
    walk: PrecisionWalk
    trt: str
    target: str

    @property
    def strongly_typed(self) -> bool:
        return self.trt == "11"


def _infer_shapes(model: ir.Model, path: str | None) -> None:
    """Fill missing value shapes with ONNX shape inference, without copying the weights.

    Inference runs on a protobuf whose large initializers carry their dims but not their data
    (read from the file when there is one), and only the inferred shapes come back: linear in the
    graph size and cheap next to loading the model.
    """
    values = [out for node in model.graph for out in node.outputs]
    if all(v.shape is not None for v in values):
        return
    proto = (
        onnx.load(path, load_external_data=False) if path is not None
        else ir.serde.serialize_model(model)
    )
    for tensor in proto.graph.initializer:
        if math.prod(tensor.dims) > _KEEP_INITIALIZER_ELEMENTS:
            # Shapes need the dims only; dropping big payloads keeps inference cheap.
            for field in ("raw_data", "float_data", "int32_data", "int64_data", "double_data"):
                tensor.ClearField(field)
            tensor.data_location = onnx.TensorProto.EXTERNAL
    try:
        # Not strict: a custom-domain plugin op must not cost the shapes of everything else.
        inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
    except Exception:  # a malformed graph: predict without shapes
        return
    infos = {vi.name: vi.type.tensor_type for vi in inferred.graph.value_info}
    infos.update({vi.name: vi.type.tensor_type for vi in inferred.graph.output})
    for value in values:
        info = infos.get(value.name or "")
        if info is None:
            continue
        if value.shape is None and info.HasField("shape"):
            value.shape = ir.Shape([
                d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                for d in info.shape.dim
            ])
        if value.dtype is None and info.elem_type:
            value.dtype = ir.DataType(info.elem_type)


def run_prediction(
    model: ir.Model | str | os.PathLike[str], *, trt: str = "8.6", target: str = "gpu"
) -> Prediction:
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
    _infer_shapes(model, None if source == "predicted" else source)
    graph = model.graph
    view = QdqView(graph)
    facts = collect_facts(graph, view)
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
    return Prediction(engine, facts, blocks, walk, version, target)


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
