"""``EngineContext``: the engine rules count compute layers as the engine report does."""

from __future__ import annotations

from pathlib import Path

import pytest

from qdqkit.engine.report import report_engine
from qdqkit.rules.engine_context import EngineContext
from qdqkit.trt.engine import EngineGraph, EngineLayer, EngineTensor, LayerKind, Precision
from qdqkit.trt.engine_json import read_engine_graph
from tests.engine.fixture_files import NAMES_ONLY_GRAPH, graph_path, mobilenet_graph

INT8, FP32 = Precision.INT8, Precision.FP32


def _layer(
    name: str, kind: LayerKind, precision: Precision, type_name: str | None = None
) -> EngineLayer:
    return EngineLayer(name=name, kind=kind, inputs=[EngineTensor(f"{name}_in", precision)],
                       outputs=[EngineTensor(f"{name}_out", precision)], type_name=type_name,
                       latency_ms=0.1)


def _context(*layers: EngineLayer) -> EngineContext:
    graph = EngineGraph(list(layers), inputs=[], outputs=[], source="constructed")
    return EngineContext(graph, reformats=[], names_only=False)


def _float_helpers() -> list[EngineLayer]:
    """FP32 layers that do no arithmetic: a Constant, a marker and a host copy."""
    return [
        _layer("(Unnamed Layer* 3) [Constant]", LayerKind.CONSTANT, FP32),
        _layer("[trainStation1]", LayerKind.OTHER, FP32, type_name="TrainStation"),
        _layer("(Unnamed Layer* 9) [NMS]_1_output[DevicetoShapeHostCopy]", LayerKind.OTHER,
               FP32),
    ]


def test_constants_markers_and_host_copies_are_not_compute() -> None:
    conv = _layer("conv", LayerKind.CONVOLUTION, INT8)
    ctx = _context(conv, *_float_helpers())
    assert ctx.compute == [conv]
    assert ctx.quantized


def test_a_quantized_constant_alone_does_not_make_the_engine_quantized() -> None:
    ctx = _context(_layer("w.weight", LayerKind.CONSTANT, INT8),
                   _layer("conv", LayerKind.CONVOLUTION, FP32))
    assert not ctx.quantized


def test_float_helpers_in_an_int8_engine_are_not_fp32_compute() -> None:
    graph = EngineGraph([_layer("conv", LayerKind.CONVOLUTION, INT8), *_float_helpers()],
                        inputs=[], outputs=[], source="constructed")
    codes = {finding.code for finding in report_engine(graph).findings}
    assert "QDQ603" not in codes
    fp32_conv = _layer("conv2", LayerKind.CONVOLUTION, FP32)
    graph.layers.append(fp32_conv)
    (finding,) = [f for f in report_engine(graph).findings if f.code == "QDQ603"]
    assert finding.layers == [fp32_conv.name]


@pytest.mark.parametrize("path", [
    NAMES_ONLY_GRAPH, graph_path("qat"), mobilenet_graph("plain"),
])
def test_rules_and_report_count_the_same_compute_layers(path: Path) -> None:
    graph = read_engine_graph(path)
    ctx = EngineContext(graph, reformats=[], names_only=bool(graph.metadata["names_only"]))
    assert len(ctx.compute) == report_engine(graph).compute_layer_count
