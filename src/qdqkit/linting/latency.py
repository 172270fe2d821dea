"""Will INT8 beat FP16? The model's predicted latency as it is and built FP16 without Q/DQ.

The FP16 baseline is the same graph with every Q/DQ pair removed, predicted for the same target
and built with FP16 as its float type; both engines are timed by ``trt.cost_model`` on one device.
Input shapes come from the model, or from ``--shapes`` spelled as trtexec spells it
(``input:32x3x224x224,mask:32x128``), which fixes symbolic dimensions such as the batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import onnx_ir as ir

from qdqkit.core.read_through import read_through_qdq
from qdqkit.core.shapes import ValueTypes, apply_input_shapes
from qdqkit.trt.cost_model import LatencyComparison, as_float_build, estimate_latency
from qdqkit.trt.engine import EngineGraph, Precision
from qdqkit.trt.gpus import Gpu
from qdqkit.trt.predict import run_prediction


def apply_shapes(model: ir.Model, shapes: Mapping[str, Sequence[int]]) -> None:
    """Set the shapes of ``model``'s inputs (the caller's own copy) from ``--shapes``."""
    apply_input_shapes(model, shapes)


def input_shapes(model: ir.Model) -> dict[str, list[int | str]]:
    """Each input's dimensions as the model gives them: a symbolic one by its name, and one an
    exporter wrote as -1 (Paddle does) as ``?``, never as a negative size."""
    return {
        value.name or "?": [_dim_text(d) for d in value.shape]
        for value in model.graph.inputs if value.shape is not None
    }


def _dim_text(dim: object) -> int | str:
    if isinstance(dim, int):
        return dim if dim >= 0 else "?"
    return str(dim)


def float_build(model: ir.Model, trt: str, precision: Precision = Precision.FP16,
                target: str = "gpu", types: ValueTypes | None = None) -> EngineGraph:
    """The engine of ``model`` without Q/DQ, built with ``precision`` as its float type for
    ``target`` (a DLA build fuses and falls back as DLA does, so it is the baseline a DLA
    prediction is timed against).

    ``types``: the value types a prediction of ``model`` inferred (``Prediction.facts.types``).
    Removing Q/DQ pairs changes no other value's shape or type, so they hold for the stripped
    copy too and ONNX inference, as long as the rest of the prediction, is not run again.

    TensorRT 11 builds strongly typed: a model whose float remainder is already ``precision``
    builds as it is, FP32 layers it keeps against overflow included, since the same network
    deployed without Q/DQ keeps them too (their cost is QDQ503's, not INT8's).
    """
    stripped = read_through_qdq(model)
    engine = run_prediction(stripped, trt=trt, target=target, types=types).engine
    if trt == "11" and _typed_as(stripped, precision):
        return engine
    return as_float_build(engine, precision)


def _typed_as(model: ir.Model, precision: Precision) -> bool:
    """Whether ``model`` computes in ``precision`` already (a float16 remainder for FP16)."""
    wanted = {Precision.FP16: ir.DataType.FLOAT16, Precision.BF16: ir.DataType.BFLOAT16}.get(
        precision)
    return wanted is not None and any(
        value.dtype == wanted for node in model.graph for value in node.outputs)


def compare_latency(model: ir.Model, engine: EngineGraph, trt: str, gpu: Gpu,
                    types: ValueTypes | None = None) -> LatencyComparison:
    """Time ``engine`` (the prediction of ``model``, which inferred ``types``) and ``model``
    built FP16 on ``gpu``."""
    as_is = estimate_latency(engine, gpu)
    fp16 = estimate_latency(float_build(model, trt, target=engine.target, types=types), gpu)
    shapes = input_shapes(model)
    if any(isinstance(d, str) for dims in shapes.values() for d in dims):
        as_is.notes.append("symbolic input dimensions count as 1: give --shapes for the batch "
                           "you deploy")
    return LatencyComparison(gpu.name, as_is, fp16, shapes)
