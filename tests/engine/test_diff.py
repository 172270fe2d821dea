"""``diff_engines`` on the real exports: plain QAT vs residual-quantized QAT, and self-diffs."""

from __future__ import annotations

import pytest

from qdqkit.engine.diff import EngineDiff, diff_engines
from qdqkit.trt.engine import EngineGraph
from qdqkit.trt.engine_json import read_engine_graph
from qdqkit.trt.engine_matching import match_layers
from tests.engine.fixture_files import (
    CONSTRUCTED,
    graph_path,
    profile_path,
    raw_end_to_end_median,
    raw_graph,
    raw_precision,
    weight_key,
)


def _read(variant: str) -> EngineGraph:
    return read_engine_graph(graph_path(variant), profile=profile_path(variant))


@pytest.fixture(scope="module")
def qat_vs_residual() -> EngineDiff:
    return diff_engines(_read("qat"), _read("qat-residual"))


def test_residual_blocks_go_from_fp16_to_int8(qat_vs_residual: EngineDiff) -> None:
    # Expected from the raw files: fused Conv+Add layers of plain QAT that write FP16, paired with
    # the layer of the other export that convolves the same weight.
    residual_layers = {weight_key(r["Name"]): r for r in raw_graph("qat-residual")["Layers"]}
    expected = set()
    for r in raw_graph("qat")["Layers"]:
        key = weight_key(r["Name"])
        if key and "Add_" in r["Name"] and raw_precision(r["Outputs"][0]["Format/Datatype"]) == "FP16":
            other = residual_layers[key]
            if raw_precision(other["Outputs"][0]["Format/Datatype"]) == "INT8":
                expected.add((r["Name"], other["Name"]))
    assert len(expected) == 7  # 8 residual joins; the last one goes FP32 (float pool after it)
    listed = {(m.a, m.b) for m in qat_vs_residual.precision_changes
              if (m.output_a, m.output_b) == ("FP16", "INT8")}
    assert expected <= listed
    assert all(weight_key(a) == weight_key(b) for a, b in listed)
    assert any("now write INT8 instead of FP16" in line for line in qat_vs_residual.summary)


def test_median_latency_drops_from_088_to_055(qat_vs_residual: EngineDiff) -> None:
    a, b = qat_vs_residual.a, qat_vs_residual.b
    assert a.end_to_end_median_ms == pytest.approx(raw_end_to_end_median("qat"))
    assert b.end_to_end_median_ms == pytest.approx(raw_end_to_end_median("qat-residual"))
    assert a.end_to_end_median_ms == pytest.approx(0.88, abs=0.01)
    assert b.end_to_end_median_ms == pytest.approx(0.55, abs=0.01)
    ratio = raw_end_to_end_median("qat") / raw_end_to_end_median("qat-residual")
    assert qat_vs_residual.summary[0].startswith(
        f"B is faster: A takes {ratio:.2f}x B's time (end-to-end median 0.883 → 0.546 ms)")


def test_reformat_counts_and_lone_layers(qat_vs_residual: EngineDiff) -> None:
    a, b = qat_vs_residual.a, qat_vs_residual.b
    assert (a.qdq_reformats, b.qdq_reformats) == (10, 3)
    gone = {la.name for la in qat_vs_residual.only_in_a if la.origin == "QDQ"}
    raw_b = {r["Name"] for r in raw_graph("qat-residual")["Layers"]}
    raw_gone = {r["Name"] for r in raw_graph("qat")["Layers"]
                if r.get("Origin") == "QDQ" and r["Name"] not in raw_b}
    # Both engines quantize the pooled features for the classifier (GlobalAveragePool -> Q -> fc),
    # numbered QuantizeLinear_250 in one export and QuantizeLinear_298 in the other: one layer.
    assert gone == raw_gone - {"QuantizeLinear_250"}
    assert ("QuantizeLinear_250", "QuantizeLinear_298") in {
        (la.name, lb.name) for la, lb in qat_vs_residual.layers.pairs}
    new = {la.name for la in qat_vs_residual.only_in_b}
    assert new == {"DequantizeLinear_291"}


def test_maxpool_is_found_fused_into_the_first_convolution(qat_vs_residual: EngineDiff) -> None:
    (group,) = qat_vs_residual.fused
    assert group.into == "conv1.weight + QuantizeLinear_7 + Conv_9 + MaxPool_12"
    assert group.layers == ["conv1.weight + QuantizeLinear_7 + Conv_9", "MaxPool_12"]
    assert group.latency_after_ms is not None and group.latency_before_ms is not None
    assert group.latency_after_ms < group.latency_before_ms


def test_auto_numbered_names_that_collide_do_not_mislead_the_match() -> None:
    # "QuantizeLinear_82 + Conv_84" is layer2.0.conv2 in one export and layer2.0.conv1 in the
    # other; the weight names decide.
    a, b = _read("qat"), _read("qat-residual")
    pairs = {a.layers[i].name: b.layers[j].name for i, j in match_layers(a, b).pairs}
    assert pairs["layer2.0.conv2.weight + QuantizeLinear_82 + Conv_84"].startswith(
        "layer2.0.conv2.weight")
    assert pairs["GlobalAveragePool_246"] == "GlobalAveragePool_294"


@pytest.mark.parametrize("variant", ["fp16", "qat", "qat-residual-qgap"])
def test_an_engine_against_itself_has_no_differences(variant: str) -> None:
    diff = diff_engines(_read(variant), _read(variant))
    assert diff.precision_changes == [] and diff.only_in_a == [] and diff.only_in_b == []
    assert diff.fused == [] and len(diff.matched) == len(raw_graph(variant)["Layers"])
    assert all(m.delta_ms == 0 for m in diff.matched)
    assert diff.summary[0].startswith("A and B take the same time")


def test_float_engines_against_qat_count_int8_layers() -> None:
    diff = diff_engines(_read("fp16"), _read("qat"))
    assert diff.a.int8_compute_layers == 0
    assert diff.b.int8_compute_layers == sum(
        1 for r in raw_graph("qat")["Layers"]
        if r["LayerType"] not in ("Reformat", "NoOp") and "Int8" in r["Inputs"][0]["Format/Datatype"])
    assert any(line.startswith("B is slower: B takes 1.02x A's time") for line in diff.summary)


def test_the_same_engine_in_the_8x_and_11x_schemas_diffs_clean() -> None:
    diff = diff_engines(read_engine_graph(graph_path("qat-residual")),
                        read_engine_graph(CONSTRUCTED / "resnet-qat-residual.trt11.graph.json"))
    assert diff.precision_changes == [] and diff.only_in_a == [] and diff.only_in_b == []
    assert len(diff.matched) == len(raw_graph("qat-residual")["Layers"])


def test_an_unprofiled_engine_tells_no_times() -> None:
    # B profiled, A not: A's side of every change has no time, so no line may read "0.000 ->".
    unprofiled = read_engine_graph(graph_path("fp16"))
    diff = diff_engines(unprofiled, _read("qat"))
    assert diff.a.layer_latency_ms is None and diff.b.layer_latency_ms is not None
    precision_lines = [line for line in diff.summary if "instead of" in line]
    assert precision_lines and not any("their time" in line for line in precision_lines)
    assert not any(" gone in B" in line or " new in B" in line for line in diff.summary)
    both = diff_engines(_read("fp16"), _read("qat"))
    assert any("their time" in line for line in both.summary)
