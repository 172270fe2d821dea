"""``report_engine`` on the real ResNet-18 exports, checked against the raw JSON."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from qdqkit.engine.report import EngineReport, report_engine
from qdqkit.report.json_output import dumps_json
from qdqkit.trt.engine_json import read_engine_graph
from tests.engine.fixture_files import (
    CONSTRUCTED,
    STEMS,
    graph_path,
    profile_path,
    raw_end_to_end_median,
    raw_graph,
    raw_is_compute,
    raw_kind,
    raw_profile,
    raw_signature,
)

QAT_VARIANTS = ["qat", "qat-residual", "qat-residual-qgap"]


def _report(variant: str) -> EngineReport:
    return report_engine(read_engine_graph(graph_path(variant), profile=profile_path(variant)))


@pytest.mark.parametrize(("variant", "issue_count"), [
    ("qat", 10), ("qat-residual", 3), ("qat-residual-qgap", 1), ("fp16", 0), ("fp32", 0),
])
def test_qdq_reformat_counts_match_the_files(variant: str, issue_count: int) -> None:
    raw = raw_graph(variant)["Layers"]
    expected_qdq = [r["Name"] for r in raw if r["LayerType"] == "Reformat" and r["Origin"] == "QDQ"]
    expected_layout = [r["Name"] for r in raw if r["LayerType"] == "Reformat" and r["Origin"] != "QDQ"]
    report = _report(variant)
    assert report.qdq_reformat_count == len(expected_qdq) == issue_count
    assert report.layout_reformat_count == len(expected_layout)
    assert [r.name for r in report.reformats if r.origin == "QDQ"] == expected_qdq
    assert [r.name for r in report.reformats if r.origin == "layout"] == expected_layout


@pytest.mark.parametrize("variant", sorted(STEMS))
def test_precision_and_type_breakdown_match_the_files(variant: str) -> None:
    raw = raw_graph(variant)["Layers"]
    times = {r["name"]: r["medianMs"] for r in raw_profile(variant)[1:]}
    compute = [r for r in raw if raw_is_compute(r)]
    expected_kp = Counter(f"{raw_kind(r)} {raw_signature(r)}" for r in compute)
    expected_kind = Counter(raw_kind(r) for r in raw)
    report = _report(variant)
    assert {b.key: b.layers for b in report.by_kind_and_precision} == dict(expected_kp)
    assert {b.key: b.layers for b in report.by_kind} == dict(expected_kind)
    for bucket in report.by_kind_and_precision:
        members = [r for r in compute if f"{raw_kind(r)} {raw_signature(r)}" == bucket.key]
        assert bucket.latency_ms == pytest.approx(sum(times[r["Name"]] for r in members))
    assert report.total_layer_latency_ms == pytest.approx(sum(times.values()))
    assert report.end_to_end_median_ms == pytest.approx(raw_end_to_end_median(variant))


def _float_residual_blocks(variant: str) -> list[str]:
    """Fused Conv+Add layers whose second (skip) input is float, read from the raw file."""
    return [r["Name"] for r in raw_graph(variant)["Layers"]
            if r["LayerType"] == "CaskConvolution" and len(r["Inputs"]) == 2
            and "Int8" not in r["Inputs"][1]["Format/Datatype"]]


def test_plain_qat_has_fp16_residual_blocks_and_the_fixes_remove_them() -> None:
    blocks = _float_residual_blocks("qat")
    assert len(blocks) == 8  # every residual join of ResNet-18
    qat = _report("qat")
    assert {b.key: b.layers for b in qat.by_kind_and_precision}[
        "Convolution INT8+FP16 → FP16"] == len(blocks)
    finding = next(f for f in qat.findings if f.rule.name == "float-residual-input")
    assert finding.layers == blocks
    # Quantizing the residual input fixes all but the last block, whose consumer (the float
    # global average pool) wants FP32; quantizing the pool input fixes that one too.
    residual = _float_residual_blocks("qat-residual")
    assert len(residual) == 1 and residual[0].startswith("layer4.1.conv2")
    finding = next(f for f in _report("qat-residual").findings if f.rule.name == "float-residual-input")
    assert finding.layers == residual
    assert _float_residual_blocks("qat-residual-qgap") == []
    assert "float-residual-input" not in {f.rule.name for f in _report("qat-residual-qgap").findings}


def test_int8_shares_match_the_files() -> None:
    for variant in QAT_VARIANTS:
        raw = raw_graph(variant)["Layers"]
        times = {r["name"]: r["medianMs"] for r in raw_profile(variant)[1:]}
        compute = [r for r in raw if raw_is_compute(r)]
        int8 = [r for r in compute if "Int8" in r["Inputs"][0]["Format/Datatype"]]
        report = _report(variant)
        assert report.int8_layer_share == pytest.approx(len(int8) / len(compute))
        assert report.int8_time_share == pytest.approx(
            sum(times[r["Name"]] for r in int8) / sum(times.values()))


def test_findings_name_what_is_left_to_fix() -> None:
    codes = {f.rule.name: f for f in _report("qat").findings}
    # The network input's Quantize is QDQ608's, with its own remedy, and is not counted twice.
    assert codes["input-quantize-reformat"].layers == ["QuantizeLinear_2"]
    assert codes["qdq-reformat"].layers[0] == "QuantizeLinear_15"
    assert len(codes["qdq-reformat"].layers) == 9
    assert codes["fp32-in-int8-engine"].layers == ["MaxPool_12"]
    assert codes["reformat-next-to-qdq"].layers == [
        "Reformatting CopyNode for Output Tensor 0 to MaxPool_12"]
    # With residual and pool quantized, the one Reformat left quantizes the network input.
    qgap = {f.rule.name: f for f in _report("qat-residual-qgap").findings}
    assert qgap["input-quantize-reformat"].layers == ["QuantizeLinear_2"]
    assert "--inputIOFormats=int8:chw" in qgap["input-quantize-reformat"].message
    assert "fp32-in-int8-engine" not in qgap
    # A float engine has no INT8 findings at all.
    fp16 = {f.rule.name for f in _report("fp16").findings}
    assert not fp16 & {"fp32-in-int8-engine", "float-residual-input", "qdq-reformat"}


def test_slowest_layers_are_the_profile_maxima() -> None:
    records = sorted(raw_profile("qat")[1:], key=lambda r: -r["medianMs"])
    report = report_engine(read_engine_graph(graph_path("qat"), profile_path("qat")), top=3)
    assert [s.name for s in report.slowest] == [r["name"] for r in records[:3]]


def test_without_profile_and_with_names_only() -> None:
    report = report_engine(read_engine_graph(graph_path("qat")))
    assert report.total_layer_latency_ms is None and report.slowest == []
    assert "no-profile" in {f.rule.name for f in report.findings}
    names_only = report_engine(read_engine_graph(CONSTRUCTED / "resnet-qat.names-only.graph.json"))
    assert names_only.names_only and names_only.int8_layer_share is None
    assert names_only.qdq_reformat_count == 10
    assert "names-only" in {f.rule.name for f in names_only.findings}


def test_a_profile_at_most_half_unmatched_is_reported_not_refused(tmp_path: Path) -> None:
    header, *records = raw_profile("qat")
    ghosts = [f"ghost layer {i}" for i in range(len(records) // 2)]
    for record, ghost in zip(records, ghosts, strict=False):
        record["name"] = ghost
    profile = tmp_path / "ghosts.profile.json"
    profile.write_text(json.dumps([header, *records]))
    report = report_engine(read_engine_graph(graph_path("qat"), profile=profile))
    (finding,) = [f for f in report.findings if f.code == "QDQ602"]
    assert finding.layers == ghosts
    assert finding.message.startswith(f"{len(ghosts)} profile records name no layer of this engine")
    lost = sum(r["averageMs"] for r in records[:len(ghosts)])
    assert finding.latency_ms == pytest.approx(lost, abs=1e-6)


def test_json_report_is_deterministic() -> None:
    assert dumps_json(_report("qat")) == dumps_json(_report("qat"))
