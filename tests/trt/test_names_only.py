"""Names-only exports (no --profilingVerbosity=detailed): kinds from names, precisions unknown."""

from __future__ import annotations

from pathlib import Path

from qdqkit.engine.diff import diff_engines
from qdqkit.engine.report import report_engine
from qdqkit.trt.engine import LayerKind
from qdqkit.trt.engine_json import parse_engine_graph, read_engine_graph

NAMES_ONLY = (Path(__file__).resolve().parent.parent / "fixtures" / "trex-resnet18-a100"
              / "constructed" / "resnet-qat.names-only.graph.json")


def test_precisions_are_unknown_not_zero_percent_int8() -> None:
    report = report_engine(read_engine_graph(NAMES_ONLY))
    assert report.names_only
    assert report.int8_layer_share is None and report.int8_time_share is None
    engine = read_engine_graph(NAMES_ONLY)
    assert diff_engines(engine, engine).a.int8_compute_layers is None


def test_copies_around_an_op_are_shuffles_and_padding_has_a_kind() -> None:
    names = ["reshape_before_/MatMul", "reshape_after_/attn/MatMul_1",
             "copied_squeeze_after_(Unnamed Layer* 7) [ElementWise]", "/encoder/Pad_3",
             "Padding_12", "/attn/MatMul", "reshape_before_MatMul_3 + MatMul_3"]
    engine = parse_engine_graph({"Layers": names, "Bindings": ["x", "y"]}, "x.json")
    assert [layer.kind for layer in engine.layers] == [
        LayerKind.SHUFFLE, LayerKind.SHUFFLE, LayerKind.SHUFFLE, LayerKind.PADDING,
        LayerKind.PADDING, LayerKind.MATRIX_MULTIPLY, LayerKind.MATRIX_MULTIPLY]
