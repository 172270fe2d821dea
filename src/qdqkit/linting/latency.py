"""Will INT8 beat FP16? The model's predicted latency as it is and built FP16 without Q/DQ.

The FP16 baseline is the same graph with every Q/DQ pair removed (``StripQdqPairs``), predicted
and built with FP16 as its float type; both engines are timed by ``trt.cost_model`` on one GPU.
Input shapes come from the model, or from ``--shapes`` spelled as trtexec spells it
(``input:32x3x224x224,mask:32x128``), which fixes symbolic dimensions such as the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx_ir as ir

from qdqkit.core.errors import QdqkitError
from qdqkit.passes.scales import ScaleTable
from qdqkit.passes.strip_qdq import StripQdqPairs
from qdqkit.trt.cost_model import LatencyEstimate, as_float_build, estimate_latency
from qdqkit.trt.engine import EngineGraph, Precision
from qdqkit.trt.gpus import Gpu
from qdqkit.trt.predict import predict_engine


@dataclass
class LatencyComparison:
    """Predicted latency of the engine as it is and of the same model built FP16."""

    gpu: str
    as_is: LatencyEstimate
    fp16: LatencyEstimate
    input_shapes: dict[str, list[int | str]]

    @property
    def speedup(self) -> float:
        """FP16 time over as-is time: above 1 the Q/DQ model is faster."""
        return self.fp16.total_ms / self.as_is.total_ms if self.as_is.total_ms > 0 else 1.0

    def to_json(self) -> dict[str, object]:
        return {
            "gpu": self.gpu, "input_shapes": self.input_shapes,
            "predicted_ms": round(self.as_is.total_ms, 6),
            "fp16_ms": round(self.fp16.total_ms, 6), "speedup_over_fp16": round(self.speedup, 4),
            "notes": self.as_is.notes,
            "costliest": [{"layer": t.layer, "time_ms": round(t.time_ms, 6), "bound": t.bound}
                          for t in self.as_is.costliest(5)],
        }


def parse_shapes(text: str) -> dict[str, list[int]]:
    """``name:1x3x224x224,other:1x128`` (trtexec's ``--shapes``) -> {name: dims}."""
    shapes: dict[str, list[int]] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, dims = item.rpartition(":")
        name = name.strip().strip("'\"")
        try:
            values = [int(d) for d in dims.lower().split("x")]
        except ValueError:
            values = []
        if not sep or not name or not values or any(v <= 0 for v in values):
            raise QdqkitError(
                f"--shapes: cannot read '{item}': write name:dims with positive dims joined by "
                "'x', e.g. input:32x3x224x224")
        shapes[name] = values
    return shapes


def apply_shapes(model: ir.Model, shapes: dict[str, list[int]]) -> None:
    """Set the shapes of ``model``'s inputs (the caller's own copy) from ``--shapes``."""
    inputs = {value.name: value for value in model.graph.inputs}
    for name, dims in shapes.items():
        value = inputs.get(name)
        if value is None:
            raise QdqkitError(
                f"--shapes names '{name}', which is not an input of the model (inputs: "
                f"{', '.join(n or '?' for n in inputs)})")
        if value.shape is not None and len(value.shape) != len(dims):
            raise QdqkitError(
                f"--shapes gives input '{name}' {len(dims)} dims, the model has "
                f"{len(value.shape)}: {list(value.shape)}")
        value.shape = ir.Shape(dims)


def input_shapes(model: ir.Model) -> dict[str, list[int | str]]:
    return {
        value.name or "?": [d if isinstance(d, int) else str(d) for d in value.shape]
        for value in model.graph.inputs if value.shape is not None
    }


def float_build(model: ir.Model, trt: str, precision: Precision = Precision.FP16) -> EngineGraph:
    """The engine of ``model`` without Q/DQ, built with ``precision`` as its float type."""
    stripped = model.clone()
    StripQdqPairs(ScaleTable())(stripped)
    return as_float_build(predict_engine(stripped, trt=trt), precision)


def compare_latency(model: ir.Model, engine: EngineGraph, trt: str, gpu: Gpu) -> LatencyComparison:
    """Time ``engine`` (the prediction of ``model``) and ``model`` built FP16 on ``gpu``."""
    as_is = estimate_latency(engine, gpu)
    fp16 = estimate_latency(float_build(model, trt), gpu)
    shapes = input_shapes(model)
    if any(isinstance(d, str) for dims in shapes.values() for d in dims):
        as_is.notes.append("symbolic input dimensions count as 1: give --shapes for the batch "
                           "you deploy")
    return LatencyComparison(gpu.name, as_is, fp16, shapes)
