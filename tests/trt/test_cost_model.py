"""The latency cost model against the five real ResNet-18 engines (A100, batch 32, trtexec medians).

Each engine is predicted twice: from its ONNX model, as ``lint`` does (the Q/DQ variants of
``qdqkit.examples.resnet``; FP32 and FP16 are the same graph without Q/DQ), and from the real
``--exportLayerInfo`` graph. Both must put the five in the measured order (plain QAT slower than
FP16) and land within 25% of each end-to-end median.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from qdqkit.core.errors import QdqkitError
from qdqkit.core.shape_spec import parse_shapes
from qdqkit.examples.resnet import BUILDS, resnet18_builds
from qdqkit.trt.cost_model import FITTED, estimate_latency, layer_macs, time_layer
from qdqkit.trt.engine import EngineGraph, EngineLayer, EngineTensor, LayerKind, Precision
from qdqkit.trt.engine_json import read_engine_graph
from qdqkit.trt.engine_timing import end_to_end_of
from qdqkit.trt.gpus import GPUS, find_gpu

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "trex-resnet18-a100"
ENGINES = BUILDS
MEASURED = {"fp32": 1.991, "fp16": 0.862, "qat": 0.883, "qat-residual": 0.546,
            "qat-residual-qgap": 0.500}


@functools.cache
def real_engines() -> dict[str, EngineGraph]:
    found = {}
    for name in ENGINES:
        graph = next((FIXTURES / name).glob("*.graph.json"))
        found[name] = read_engine_graph(
            graph, graph.with_name(graph.name.replace(".graph.json", ".profile.json")))
    return found


@functools.cache
def onnx_engines() -> dict[str, EngineGraph]:
    return resnet18_builds()


def test_the_measured_medians_are_the_fixture_files() -> None:
    for name, engine in real_engines().items():
        timing = end_to_end_of(engine)
        assert timing is not None
        assert timing.median_ms == pytest.approx(MEASURED[name], abs=5e-4)


@pytest.mark.parametrize("source", ["onnx", "real"])
def test_five_engines_in_order_and_within_25_percent(source: str) -> None:
    engines = onnx_engines() if source == "onnx" else real_engines()
    times = {n: estimate_latency(e, "A100").total_ms for n, e in engines.items()}
    assert sorted(times, key=times.__getitem__) == sorted(MEASURED, key=MEASURED.__getitem__)
    assert times["qat"] > times["fp16"]  # the case users ask about: plain QAT loses
    for name, measured in MEASURED.items():
        assert abs(times[name] / measured - 1) <= 0.25, (name, times[name], measured)


def test_real_convolution_macs_come_from_the_export_fields() -> None:
    engine = real_engines()["fp16"]
    conv = next(la for la in engine.layers if la.name == "Conv_3 + Relu_4")
    assert layer_macs(conv) == 32 * 64 * 56 * 56 * 64 * 3 * 3
    predicted = next(la for la in onnx_engines()["fp16"].layers if "Conv_11" in la.name)
    assert layer_macs(predicted) == layer_macs(conv)


def test_fp32_runs_as_tf32_only_where_the_gpu_has_it() -> None:
    conv = next(la for la in real_engines()["fp32"].layers if la.name == "Conv_3 + Relu_4")
    a100, t4 = time_layer(conv, find_gpu("A100")), time_layer(conv, find_gpu("T4"))
    assert a100.math == "tf32" and t4.math == "fp32"
    assert time_layer(conv, find_gpu("A100"), tf32=False).time_ms > a100.time_ms


def test_reformat_bytes_count_the_channel_padding_of_vectorized_formats() -> None:
    def reformat(fmt: str) -> EngineLayer:
        return EngineLayer("r", LayerKind.REFORMAT, inputs=[
            EngineTensor("x", Precision.FP32, "Row major linear FP32", (32, 3, 224, 224))],
            outputs=[EngineTensor("y", Precision.INT8, fmt, (32, 3, 224, 224))])
    plain = time_layer(reformat("Row major Int8 format"), find_gpu("A100"))
    padded = time_layer(reformat("Thirty-two wide channel vectorized row major Int8 format"),
                        find_gpu("A100"))
    elements = 32 * 3 * 224 * 224
    assert plain.bytes == elements * 5
    assert padded.bytes == elements * 4 + elements // 3 * 32
    assert padded.time_ms > plain.time_ms


def test_noop_costs_nothing_and_every_kernel_pays_the_overhead() -> None:
    noop = EngineLayer("n", LayerKind.NOOP)
    pool = EngineLayer("p", LayerKind.POOLING, inputs=[EngineTensor("x", Precision.FP16,
                                                                    shape=(1, 8, 2, 2))])
    gpu = find_gpu("A100")
    assert time_layer(noop, gpu).time_ms == 0
    assert time_layer(pool, gpu).time_ms >= FITTED.layer_overhead_us / 1e3


def test_same_engine_is_faster_on_a_bigger_gpu() -> None:
    engine = onnx_engines()["qat-residual"]
    t4, a100, h100 = (estimate_latency(engine, g).total_ms for g in ("T4", "A100", "H100"))
    assert h100 < a100 < t4


def test_gpu_table_and_lookup() -> None:
    names = {g.name for g in GPUS}
    assert {"A100", "H100", "L4", "T4", "RTX3090", "RTX4090", "TITAN-RTX", "ORIN",
            "ORIN-DLA"} <= names
    assert find_gpu("rtx 4090").name == "RTX4090"
    with pytest.raises(QdqkitError, match="unknown GPU 'V100'"):
        find_gpu("V100")


def test_shapes_spelling_of_trtexec() -> None:
    assert parse_shapes("input:32x3x224x224, mask:32x128") == {
        "input": (32, 3, 224, 224), "mask": (32, 128)}
    with pytest.raises(QdqkitError, match="--shapes"):
        parse_shapes("input:32xbad")
