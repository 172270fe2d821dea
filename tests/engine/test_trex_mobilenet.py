"""``engine report|draw|diff`` on trt-engine-explorer's exports: two MobileNet-v2 QAT builds
(detailed) and a names-only detector export with Myelin layers, markers and host copies.

Expected values are read from the raw files here (``fixture_files``), never through qdqkit.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from qdqkit.cli import main
from qdqkit.engine.diff import EngineDiff, diff_engines
from qdqkit.engine.report import report_engine
from qdqkit.trt.engine import LayerKind
from qdqkit.trt.engine_json import non_compute_role, read_engine_graph
from tests.engine.fixture_files import (
    MOBILENET,
    NAMES_ONLY_GRAPH,
    NAMES_ONLY_PROFILE,
    mobilenet_graph,
    mobilenet_profile,
    raw_layer_names,
    raw_records,
)

NAMES_ONLY = ["engine", "report", str(NAMES_ONLY_GRAPH), "--profile", str(NAMES_ONLY_PROFILE)]


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def _raw_detailed(variant: str) -> list[dict[str, Any]]:
    layers: list[dict[str, Any]] = json.loads(mobilenet_graph(variant).read_text())["Layers"]
    return layers


def _matched_average_ms(graph: Path, profile: Path) -> tuple[float, float]:
    """Summed averageMs of the records that name a layer of ``graph``, and of those that do not."""
    names = set(raw_layer_names(graph))
    records = raw_records(profile)
    matched = sum(r["averageMs"] for r in records if r["name"] in names)
    return matched, sum(r["averageMs"] for r in records) - matched


# --- 1. the drawing's header -------------------------------------------------------------------

def _header(html: str) -> str:
    found = re.search(r"\d+ layers · [^<]*", html)
    assert found, "the page has no summary line"
    return found.group(0)


def test_the_drawing_of_a_names_only_export_says_int8_is_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "names.html"
    code, _, err = _run(["engine", "draw", str(NAMES_ONLY_GRAPH), "--profile",
                         str(NAMES_ONLY_PROFILE), "-o", str(out)], capsys)
    assert code == 0, err
    header = _header(out.read_text())
    assert "INT8 unknown (names-only export)" in header
    assert not re.search(r"\d+/\d+ compute layers INT8", header)
    # A detailed export still gets its count, from the input precision of each compute layer.
    raw = [r for r in _raw_detailed("plain") if r["LayerType"] not in ("Reformat", "NoOp")]
    int8 = sum(1 for r in raw if "Int8" in r["Inputs"][0]["Format/Datatype"])
    code, _, err = _run(["engine", "draw", str(mobilenet_graph("plain")), "-o",
                         str(tmp_path / "plain.html")], capsys)
    assert code == 0, err
    assert f"{int8}/{len(raw)} compute layers INT8" in _header((tmp_path / "plain.html").read_text())


# --- 2. diffs -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def names_only_vs_mobilenet() -> EngineDiff:
    return diff_engines(read_engine_graph(NAMES_ONLY_GRAPH, profile=NAMES_ONLY_PROFILE),
                        read_engine_graph(mobilenet_graph("plain"), mobilenet_profile("plain")))


def test_a_names_only_side_is_never_compared_by_precision(
    names_only_vs_mobilenet: EngineDiff,
) -> None:
    diff = names_only_vs_mobilenet
    assert diff.precision_changes == []
    assert not any("UNKNOWN" in line for line in diff.summary)
    assert ("precisions are unknown in A (a names-only export): precision changes are not "
            "compared") in diff.summary


def test_two_different_networks_are_not_paired_as_facts(
    names_only_vs_mobilenet: EngineDiff, capsys: pytest.CaptureFixture[str]
) -> None:
    # The detector and MobileNet share no layer name: no pair has evidence.
    shared = set(raw_layer_names(NAMES_ONLY_GRAPH)) & set(raw_layer_names(mobilenet_graph("plain")))
    assert shared == set()
    diff = names_only_vs_mobilenet
    assert diff.match_evidence.weak and diff.match_evidence.evidenced_pairs == 0
    assert any(line.startswith("the layer pairs are guesses: only 0 of the") for line in diff.summary)
    assert not any(" gone in B" in line or "in both engines" in line for line in diff.summary)
    code, out, _ = _run(["engine", "diff", str(NAMES_ONLY_GRAPH), str(mobilenet_graph("plain")),
                         "--profile-a", str(NAMES_ONLY_PROFILE),
                         "--profile-b", str(mobilenet_profile("plain"))], capsys)
    assert code == 0 and "largest changes (guessed pairs)" in out
    assert "(matched layers)" not in out


def test_the_headline_is_a_ratio_of_times(names_only_vs_mobilenet: EngineDiff) -> None:
    a_ms, _ = _matched_average_ms(NAMES_ONLY_GRAPH, NAMES_ONLY_PROFILE)
    b_ms, _ = _matched_average_ms(mobilenet_graph("plain"), mobilenet_profile("plain"))
    assert names_only_vs_mobilenet.summary[0] == (
        f"B is faster: A takes {a_ms / b_ms:.0f}x B's time (summed layer time {a_ms:.3f} → "
        f"{b_ms:.3f} ms)")
    assert "%" not in names_only_vs_mobilenet.summary[0]


def test_two_builds_of_one_network_pair_with_evidence() -> None:
    """The control: MobileNet with and without quantized residuals, renumbered node names."""
    diff = diff_engines(
        read_engine_graph(mobilenet_graph("plain"), mobilenet_profile("plain")),
        read_engine_graph(mobilenet_graph("residuals"), mobilenet_profile("residuals")))
    assert not diff.match_evidence.weak
    assert diff.match_evidence.evidenced_pairs == diff.match_evidence.smaller_engine_layers
    medians = [json.loads((MOBILENET / f"{stem}.onnx.engine.profile.metadata.json").read_text())
               ["performance_summary"]["Latency"][3] for stem in ("mobilenet.qat",
                                                                  "mobilenet_v2_residuals.qat")]
    assert diff.summary[0].startswith(
        f"B is faster: A takes {medians[0] / medians[1]:.2f}x B's time (end-to-end median")
    assert any("now write INT8 instead of FP16" in line for line in diff.summary)


# --- 3. kinds and compute layers of the names-only export ----------------------------------------

def test_foreign_nodes_are_myelin_whatever_their_brackets_name() -> None:
    graph = read_engine_graph(NAMES_ONLY_GRAPH)
    foreign = [la for la in graph.layers if la.name.startswith("{ForeignNode[")]
    names = [n for n in raw_layer_names(NAMES_ONLY_GRAPH) if n.startswith("{ForeignNode[")]
    assert [la.name for la in foreign] == names and len(names) == 2
    assert any("Concat" in n for n in names)  # the op name that used to decide the kind
    assert {la.kind for la in foreign} == {LayerKind.MYELIN}


def test_markers_constants_and_host_copies_are_not_compute_layers() -> None:
    names = raw_layer_names(NAMES_ONLY_GRAPH)
    expected = {
        "marker": [n for n in names if re.fullmatch(r"\[trainStation\d+\]", n)],
        "Constant": [n for n in names if n.endswith(") [Constant]") or re.search(
            r"\.running_(?:var|mean) \+ \(Unnamed Layer\* \d+\) \[Shuffle\]$", n)],
        "host copy": [n for n in names if n.endswith("[DevicetoShapeHostCopy]")],
        "Reformat": [n for n in names if n.startswith("Reformatting CopyNode")
                     or re.fullmatch(r"[\w/.]+/QuantizeLinear(?:_clone_\d+)?", n)],
    }
    assert {role: len(found) for role, found in expected.items()} == {
        "marker": 3, "Constant": 9, "host copy": 1, "Reformat": 16}
    graph = read_engine_graph(NAMES_ONLY_GRAPH)
    roles = {la.name: non_compute_role(la) for la in graph.layers}
    for role, found in expected.items():
        assert {roles[n] for n in found} == {role}
    report = report_engine(graph)
    assert report.compute_layer_count == len(names) - sum(map(len, expected.values())) == 57
    assert report.non_compute_counts == {"Reformat": 16, "NoOp": 0, "Constant": 9, "marker": 3,
                                         "host copy": 1}
    # Every layer of a detailed export that is not a Reformat or NoOp still computes.
    raw = _raw_detailed("plain")
    detailed = report_engine(read_engine_graph(mobilenet_graph("plain")))
    assert detailed.compute_layer_count == sum(
        1 for r in raw if r["LayerType"] not in ("Reformat", "NoOp"))


# --- 4. a profile of another engine ---------------------------------------------------------------

def test_a_profile_of_another_engine_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    graph, profile = mobilenet_graph("plain"), mobilenet_profile("residuals")
    names = set(raw_layer_names(graph))
    records = raw_records(profile)
    unmatched = sum(1 for r in records if r["name"] not in names)
    assert unmatched * 2 > len(records)
    drawing = tmp_path / "never.html"
    for command in (["report"], ["draw", "-o", str(drawing)]):
        code, out, err = _run(["engine", command[0], str(graph), "--profile", str(profile),
                               *command[1:]], capsys)
        assert code == 2 and out == "" and err.count("\n") == 1
        assert f"the profile is of another engine: {unmatched} of its {len(records)} records" in err
        assert str(profile) in err and str(graph) in err
    assert not drawing.exists()


def test_unmatched_profile_records_say_how_much_time_they_hold(
    capsys: pytest.CaptureFixture[str],
) -> None:
    matched_ms, lost_ms = _matched_average_ms(mobilenet_graph("plain"), mobilenet_profile("plain"))
    assert round(lost_ms, 3) == 0.057
    report = report_engine(read_engine_graph(mobilenet_graph("plain"), mobilenet_profile("plain")))
    (finding,) = [f for f in report.findings if f.rule.name == "profile-mismatch"]
    assert finding.latency_ms == pytest.approx(lost_ms, abs=1e-6)  # kept to the nanosecond
    share = lost_ms / (matched_ms + lost_ms)
    assert "12 profile records name no layer of this engine" in finding.message
    assert f"their {lost_ms:.3f} ms ({share:.1%} of the profile's time)" in finding.message
    assert f"{share:.1%}" == "8.8%"
    code, out, _ = _run(["engine", "report", str(mobilenet_graph("plain")), "--profile",
                         str(mobilenet_profile("plain")), "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and next(f for f in data["findings"] if f["code"] == "profile-mismatch")[
        "latency_ms"] == pytest.approx(lost_ms, abs=1e-6)
    # One record: the verb agrees.
    single = report_engine(read_engine_graph(mobilenet_graph("residuals"),
                                             mobilenet_profile("residuals")))
    (finding,) = [f for f in single.findings if f.rule.name == "profile-mismatch"]
    assert finding.message.startswith("1 profile record names no layer")


# --- 5. arguments and signs -----------------------------------------------------------------------

def test_a_negative_top_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:  # argparse's own exit
        main([*NAMES_ONLY, "--top", "-1"])
    out, err = capsys.readouterr()
    assert refused.value.code == 2 and out == ""
    assert "argument --top: must be 0 or more, not -1" in err
    code, out, _ = _run([*NAMES_ONLY, "--top", "0"], capsys)
    assert code == 0 and "slowest layers" not in out


def test_changes_that_round_to_nothing_print_unsigned(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["engine", "diff", str(mobilenet_graph("plain")),
                         str(mobilenet_graph("residuals")),
                         "--profile-a", str(mobilenet_profile("plain")),
                         "--profile-b", str(mobilenet_profile("residuals")), "--layers"], capsys)
    assert code == 0
    rows = out.split("layer in A")[1].splitlines()[2:]
    # "QuantizeLinear_2" is one layer in both builds, 0.0122041 ms then 0.0118708 ms.
    times = {r["name"]: r["averageMs"] for r in raw_records(mobilenet_profile("plain"))}
    other = {r["name"]: r["averageMs"] for r in raw_records(mobilenet_profile("residuals"))}
    assert abs(other["QuantizeLinear_2"] - times["QuantizeLinear_2"]) < 0.0005
    row = next(r for r in rows if r.startswith("QuantizeLinear_2 "))
    assert row.split()[-1] == "0.000"
    assert "-0.000" not in out and "+0.000" not in out


# --- 6. which profile statistic is summed -------------------------------------------------------

def test_every_export_sums_the_average(capsys: pytest.CaptureFixture[str]) -> None:
    records = raw_records(NAMES_ONLY_PROFILE)
    average = sum(r["averageMs"] for r in records)
    median = sum(r["medianMs"] for r in records)
    assert round(average, 3) != round(median, 3)  # the file can tell the two apart
    report = report_engine(read_engine_graph(NAMES_ONLY_GRAPH, profile=NAMES_ONLY_PROFILE))
    assert report.total_layer_latency_ms == pytest.approx(average)
    assert report.layer_latency_measure == "averageMs"
    code, out, _ = _run(NAMES_ONLY, capsys)
    assert code == 0
    assert f"latency    {average:.3f} ms summed over layers (profile averageMs)" in out.splitlines()
    # The detailed export has averageMs only: the same statistic.
    matched_ms, _ = _matched_average_ms(mobilenet_graph("plain"), mobilenet_profile("plain"))
    detailed = report_engine(read_engine_graph(mobilenet_graph("plain"), mobilenet_profile("plain")))
    assert detailed.total_layer_latency_ms == pytest.approx(matched_ms)
    assert detailed.layer_latency_measure == "averageMs"
