"""Reading ``trtexec`` engine exports (8.x/10.x and 11.x schemas, detailed and names-only)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qdqkit.core.errors import EngineFileError
from qdqkit.trt.engine import LayerKind, Precision
from qdqkit.trt.engine_json import (
    kind_of,
    onnx_nodes_of,
    precision_of,
    read_engine_graph,
    read_profile,
)
from qdqkit.trt.engine_timing import end_to_end_of, parse_timing
from tests.engine.fixture_files import (
    CONSTRUCTED,
    STEMS,
    graph_path,
    profile_path,
    raw_end_to_end_median,
    raw_graph,
    raw_kind,
    raw_precision,
    raw_profile,
)

VARIANTS = sorted(STEMS)


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_layer_and_tensor_is_read_as_the_file_says(variant: str) -> None:
    raw = raw_graph(variant)
    graph = read_engine_graph(graph_path(variant))
    assert [la.name for la in graph.layers] == [r["Name"] for r in raw["Layers"]]
    for layer, r in zip(graph.layers, raw["Layers"], strict=True):
        assert layer.kind.value == raw_kind(r), layer.name
        assert layer.type_name == r["LayerType"]
        assert [t.name for t in layer.inputs] == [t["Name"] for t in r["Inputs"]]
        assert [t.precision.value for t in layer.inputs] == [
            raw_precision(t["Format/Datatype"]) for t in r["Inputs"]]
        assert [t.precision.value for t in layer.outputs] == [
            raw_precision(t["Format/Datatype"]) for t in r["Outputs"]]
        assert [t.shape for t in layer.outputs] == [tuple(t["Dimensions"]) for t in r["Outputs"]]
        expected_origin = {"QDQ": "QDQ", "REFORMAT": "layout"}.get(r.get("Origin", ""))
        assert layer.origin == expected_origin
        # Fields the model has no slot for are kept as read.
        for key in ("ParameterType", "Kernel", "Stride", "Weights", "PoolingType"):
            if key in r:
                assert layer.extra[key] == r[key]


@pytest.mark.parametrize("variant", VARIANTS)
def test_bindings_become_network_inputs_and_outputs(variant: str) -> None:
    raw = raw_graph(variant)
    graph = read_engine_graph(graph_path(variant))
    first, last = raw["Layers"][0], raw["Layers"][-1]
    assert [t.name for t in graph.inputs] == [first["Inputs"][0]["Name"]]
    assert [t.name for t in graph.outputs] == [last["Outputs"][0]["Name"]]
    assert {*raw["Bindings"]} == {t.name for t in graph.inputs + graph.outputs}
    assert graph.metadata["schema"] == "TensorRT 8.x-10.x"


@pytest.mark.parametrize("variant", VARIANTS)
def test_profile_times_land_on_the_layer_of_the_same_name(variant: str) -> None:
    records = raw_profile(variant)
    assert "name" not in records[0]  # the run count, not a layer
    graph = read_engine_graph(graph_path(variant), profile=profile_path(variant))
    by_name = {la.name: la for la in graph.layers}
    for record in records[1:]:
        assert by_name[record["name"]].latency_ms == pytest.approx(record["medianMs"])
    assert graph.total_latency_ms() == pytest.approx(sum(r["medianMs"] for r in records[1:]))
    assert graph.metadata["unmatched_profile_records"] == []
    assert len(read_profile(profile_path(variant))) == len(records) - 1


@pytest.mark.parametrize("variant", VARIANTS)
def test_end_to_end_median_comes_from_the_summary_beside_the_profile(variant: str) -> None:
    graph = read_engine_graph(graph_path(variant), profile=profile_path(variant))
    timing = end_to_end_of(graph)
    assert timing is not None
    assert timing.median_ms == pytest.approx(raw_end_to_end_median(variant))


def test_fused_onnx_nodes_from_names_and_from_metadata() -> None:
    assert onnx_nodes_of("conv1.weight + QuantizeLinear_7 + Conv_9") == [
        "conv1.weight", "QuantizeLinear_7", "Conv_9"]
    assert onnx_nodes_of("Reformatting CopyNode for Input Tensor 0 to Conv_3") == []
    metadata = "[ONNX Layer: /l1/Conv]\x1f[ONNX Layer: (Unnamed Layer* 3) [Shuffle]]"
    assert onnx_nodes_of("__myl_ConvRelu_0", metadata) == ["/l1/Conv", "(Unnamed Layer* 3) [Shuffle]"]


@pytest.mark.parametrize(("text", "expected"), [
    ("Thirty-two wide channel vectorized row major Int8 format", Precision.INT8),
    ("Row major linear FP32", Precision.FP32),
    ("Channel major FP16 format where channel % 8 == 0", Precision.FP16),
    ("Two wide channel vectorized row major FP16 format", Precision.FP16),
    ("Row major linear BFloat16 format", Precision.BF16),
    ("Half", Precision.FP16), ("Float", Precision.FP32), ("Int8", Precision.INT8),
    ("FP8", Precision.FP8), ("Int32", Precision.INT32), ("Bool", Precision.BOOL),
    ("something else", Precision.UNKNOWN),
])
def test_precision_words(text: str, expected: Precision) -> None:
    assert precision_of(text) is expected


@pytest.mark.parametrize(("layer_type", "kind"), [
    ("CaskConvolution", LayerKind.CONVOLUTION), ("ConvActPool", LayerKind.CONVOLUTION),
    ("CaskGemmConvolution", LayerKind.CONVOLUTION), ("CaskDeconvolution", LayerKind.DECONVOLUTION),
    ("TiledPooling", LayerKind.POOLING), ("Reformat", LayerKind.REFORMAT),
    ("PointWiseV2", LayerKind.POINTWISE), ("NoOp", LayerKind.NOOP), ("gemm", LayerKind.MATRIX_MULTIPLY),
    ("kgen", LayerKind.MYELIN), ("Shuffle", LayerKind.SHUFFLE), ("Mystery", LayerKind.OTHER),
])
def test_layer_types_are_normalized(layer_type: str, kind: LayerKind) -> None:
    assert kind_of(layer_type) is kind


def test_trt11_schema_reads_like_the_8x_file_it_was_made_from() -> None:
    raw = raw_graph("qat-residual")
    path = CONSTRUCTED / "resnet-qat-residual.trt11.graph.json"
    raw11 = json.loads(path.read_text())
    assert "Bindings" not in raw11 and "Format/Datatype" not in json.dumps(raw11)
    graph = read_engine_graph(path)
    assert graph.metadata["schema"] == "TensorRT 11.x"
    assert [la.kind.value for la in graph.layers] == [raw_kind(r) for r in raw["Layers"]]
    for layer, r in zip(graph.layers, raw["Layers"], strict=True):
        assert [t.precision.value for t in layer.inputs + layer.outputs] == [
            raw_precision(t["Format/Datatype"]) for t in r["Inputs"] + r["Outputs"]]
    assert sum(1 for la in graph.layers if la.origin == "QDQ") == sum(
        1 for r in raw["Layers"] if r.get("Origin") == "QDQ")
    io = raw11["I/O Tensors"]
    assert [t.name for t in graph.inputs] == [t["Name"] for t in io if t["IOMode"] == "Input"]
    assert [t.name for t in graph.outputs] == [t["Name"] for t in io if t["IOMode"] == "Output"]
    assert graph.inputs[0].precision is Precision.FP32
    assert graph.inputs[0].format == io[0]["ProfileInfo"][0]["Format"]
    # TensorRT 10+ name the fused ONNX layers in Metadata (no weights there).
    conv = graph.layers[1]
    assert conv.onnx_nodes == ["QuantizeLinear_7", "Conv_9", "MaxPool_12"]


@pytest.mark.parametrize("name", ["resnet-qat.names-only.graph.json",
                                  "resnet-qat-residual.trt11.names-only.graph.json"])
def test_names_only_exports_guess_kinds_and_say_so(name: str) -> None:
    raw = json.loads((CONSTRUCTED / name).read_text())
    graph = read_engine_graph(CONSTRUCTED / name)
    assert graph.metadata["names_only"] is True
    assert [la.name for la in graph.layers] == raw["Layers"]
    qdq = [n for n in raw["Layers"] if n.startswith(("QuantizeLinear", "DequantizeLinear"))]
    assert [la.name for la in graph.qdq_reformats()] == qdq
    copies = [n for n in raw["Layers"] if n.startswith("Reformatting CopyNode")]
    assert [la.name for la in graph.reformats() if la.origin == "layout"] == copies
    convs = [la for la in graph.layers if "Conv_" in la.name and " + " in la.name]
    assert convs and all(la.kind is LayerKind.CONVOLUTION for la in convs)
    assert all(la.precision is Precision.UNKNOWN and la.notes for la in graph.layers)


def _write(tmp_path: Path, text: str, name: str = "engine.graph.json") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "not valid JSON (line 1"),
    ('{"Layers": [{"Name": "a", "LayerType": "Reformat"}, {"LayerType": "NoOp"}]}',
     "layer 1 has no Name"),
    ('{"Layers": [3]}', "layer 0 is int, expected an object or a name"),
    ('{"Layers": [{"Name": "a", "Inputs": {"Name": "x"}}]}', "layer 0 ('a'): input is dict"),
    ('{"Layers": [{"Name": "a", "Outputs": [{"Format/Datatype": "Int8"}]}]}',
     "layer 0 ('a'): output 0 has no Name"),
    ('{"layers": []}', 'no "Layers" list'),
    ('[{"count": 10}, {"name": "a", "medianMs": 1.0}]', "this is an --exportProfile file"),
    ('{"Layers": [], "Bindings": "input"}', '"Bindings" is not a list'),
])
def test_malformed_graph_files_get_one_line_naming_file_and_problem(
    tmp_path: Path, content: str, message: str
) -> None:
    path = _write(tmp_path, content)
    with pytest.raises(EngineFileError) as info:
        read_engine_graph(path)
    assert message in str(info.value)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(("content", "message"), [
    ('{"Layers": []}', "this is an --exportLayerInfo file"),
    ('[{"count": 1}, {"timeMs": 1.0}]', "record 1 has no name"),
    ('[{"count": 1}, {"name": "a", "percentage": 3}]', "record 1 ('a') has no medianMs or averageMs"),
    ('[{"count": 1}, {"name": "a", "medianMs": "fast"}]', "medianMs is not a number"),
])
def test_malformed_profiles(tmp_path: Path, content: str, message: str) -> None:
    path = _write(tmp_path, content, "engine.profile.json")
    with pytest.raises(EngineFileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_profile(path)


def test_missing_file_and_profile_of_another_engine(tmp_path: Path) -> None:
    with pytest.raises(EngineFileError, match="no such file"):
        read_engine_graph(tmp_path / "absent.json")
    # Refused by the reader itself, so the Python API, the CLI and every other caller agree.
    graph, profile = graph_path("qat"), profile_path("fp16")
    names = {r["Name"] for r in raw_graph("qat")["Layers"]}
    records = raw_profile("fp16")[1:]
    unmatched = sum(1 for r in records if r["name"] not in names)
    assert unmatched * 2 > len(records)
    with pytest.raises(EngineFileError) as refused:
        read_engine_graph(graph, profile=profile)
    assert str(refused.value) == (
        f"{profile}: the profile is of another engine: {unmatched} of its {len(records)} records "
        f"name no layer of {graph}; pass the --exportProfile file of the same trtexec run as the "
        "--exportLayerInfo file")


def _profile_with_ghosts(tmp_path: Path, ghosts: int, records: int | None = None) -> Path:
    """The QAT profile cut to ``records`` layer records, the first ``ghosts`` of them renamed to
    layers the QAT graph does not have."""
    header, *layers = raw_profile("qat")
    layers = layers[:records]
    for index, record in enumerate(layers[:ghosts]):
        record["name"] = f"ghost layer {index}"
    path = tmp_path / "ghosts.profile.json"
    path.write_text(json.dumps([header, *layers]))
    return path


@pytest.mark.parametrize(("ghosts", "records"), [(18, None), (18, 36), (1, None)])
def test_a_profile_half_or_less_unmatched_is_read_and_its_ghosts_kept(
    tmp_path: Path, ghosts: int, records: int | None
) -> None:
    profile = _profile_with_ghosts(tmp_path, ghosts, records)
    graph = read_engine_graph(graph_path("qat"), profile=profile)
    assert graph.metadata["unmatched_profile_records"] == [f"ghost layer {i}" for i in range(ghosts)]
    assert graph.metadata["profile_records"] == (records or len(raw_profile("qat")) - 1)


@pytest.mark.parametrize(("ghosts", "records"), [(19, None), (19, 36)])
def test_a_profile_more_than_half_unmatched_is_refused(
    tmp_path: Path, ghosts: int, records: int | None
) -> None:
    profile = _profile_with_ghosts(tmp_path, ghosts, records)
    total = records or len(raw_profile("qat")) - 1
    with pytest.raises(EngineFileError, match=f"{ghosts} of its {total} records name no layer"):
        read_engine_graph(graph_path("qat"), profile=profile)


def test_end_to_end_timing_from_a_trtexec_log_and_from_export_times() -> None:
    log = ("[I] Latency: min = 0.9 ms, max = 1.2 ms, mean = 1.0 ms, median = 0.95 ms, "
           "percentile(90%) = 1.1 ms\n[I] GPU Compute Time: min = 0.8 ms, max = 1.1 ms, "
           "mean = 0.9 ms, median = 0.85 ms, percentile(90%) = 1.0 ms\n")
    timing = parse_timing(log, "build.log")
    assert (timing.measure, timing.median_ms) == ("GPU Compute Time", 0.85)
    times = json.dumps([{"computeMs": v, "latencyMs": v + 0.1} for v in (0.5, 0.7, 0.6)])
    assert parse_timing(times, "times.json").median_ms == pytest.approx(0.6)
    with pytest.raises(EngineFileError, match="no end-to-end timing"):
        parse_timing("nothing here", "x.log")


def test_json_nested_too_deeply_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "layers.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(EngineFileError, match="nested too deeply"):
        read_engine_graph(path)
