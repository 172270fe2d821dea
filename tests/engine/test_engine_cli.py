"""``qdqkit engine report|draw|diff`` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qdqkit.cli import main
from tests.engine.fixture_files import graph_path, profile_path, raw_end_to_end_median

MODELS = Path(__file__).resolve().parent.parent / "fixtures" / "models"


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_report_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["engine", "report", str(graph_path("qat")), "--profile", str(profile_path("qat"))]
    code, out, _ = _run(args, capsys)
    assert code == 0
    assert "Reformat layers: 10 from Q/DQ, 2 layout" in out
    assert "Convolution INT8+FP16 → FP16          8" in out
    assert "float-residual-input" in out
    code, out, _ = _run([*args, "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["qdq_reformat_count"] == 10
    assert data["end_to_end_median_ms"] == pytest.approx(raw_end_to_end_median("qat"))


def test_draw_writes_one_file_and_never_the_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "qat.html"
    code, out, _ = _run(["engine", "draw", str(graph_path("qat")), "--profile",
                         str(profile_path("qat")), "-o", str(out_file)], capsys)
    assert code == 0 and out_file.exists() and "37 layers" in out
    html = out_file.read_text()
    assert "<script>" in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert [p.name for p in tmp_path.iterdir()] == ["qat.html"]  # no temporaries left behind
    code, _, _ = _run(["engine", "draw", str(graph_path("qat")), "-o", str(tmp_path / "q.svg")],
                      capsys)
    assert code == 0 and (tmp_path / "q.svg").read_text().startswith("<?xml")


def test_draw_refuses_to_overwrite_its_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "engine.svg"
    target.write_text(graph_path("qat").read_text())
    code, _, err = _run(["engine", "draw", str(target), "-o", str(target)], capsys)
    assert code == 2 and "would overwrite the input" in err


def test_diff_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["engine", "diff", str(graph_path("qat")), str(graph_path("qat-residual")),
            "--profile-a", str(profile_path("qat")), "--profile-b", str(profile_path("qat-residual"))]
    code, out, _ = _run(args, capsys)
    assert code == 0
    assert "B is faster: A takes 1.62x B's time (end-to-end median 0.883 → 0.546 ms)" in out
    assert "precision changes (layer in B)" in out
    code, out, _ = _run([*args, "--json"], capsys)
    data = json.loads(out)
    assert data["a"]["qdq_reformats"] == 10 and data["b"]["qdq_reformats"] == 3


def test_diff_with_an_onnx_side_uses_the_predicted_engine(capsys: pytest.CaptureFixture[str]) -> None:
    model = str(MODELS / "polygraphy_residual_block.onnx")
    code, out, err = _run(["engine", "diff", model, model, "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data["a"]["source"] == "predicted" and data["a"]["layers"] > 0
    assert data["precision_changes"] == [] and data["only_in_a"] == data["only_in_b"] == []


@pytest.mark.parametrize("content", ["{oops", '{"Layers": [{"LayerType": "Reformat"}]}'])
def test_bad_input_is_one_line_on_stderr_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str
) -> None:
    bad = tmp_path / "bad.graph.json"
    bad.write_text(content)
    code, out, err = _run(["engine", "report", str(bad)], capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"qdqkit: error: {bad}:") and err.count("\n") == 1
    assert "Traceback" not in err


def test_the_python_api_names_the_engine_functions() -> None:
    import qdqkit

    graph = qdqkit.read_engine_graph(graph_path("qat"), profile=profile_path("qat"))
    assert qdqkit.report_engine(graph).qdq_reformat_count == 10
    assert qdqkit.diff_engines(graph, graph).precision_changes == []
    assert callable(qdqkit.draw_engine) and callable(qdqkit.build_engine)


def test_report_takes_the_end_to_end_timing_from_a_trtexec_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "build.log"
    log.write_text("[11/21/2026-00:00:00] [I] GPU Compute Time: min = 0.41 ms, max = 0.52 ms, "
                   "mean = 0.45 ms, median = 0.44 ms, percentile(90%) = 0.5 ms\n")
    code, out, _ = _run(["engine", "report", str(graph_path("qat")), "--profile",
                         str(profile_path("qat")), "--timing", str(log), "--json"], capsys)
    assert code == 0 and json.loads(out)["end_to_end_median_ms"] == 0.44


def test_diff_layers_lists_every_matched_layer_with_both_times(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """A prediction against the real export: each matched layer's time on both sides."""
    import onnx

    from qdqkit.examples.resnet import resnet18_qdq

    path = tmp_path / "resnet18-qat.onnx"
    onnx.save(resnet18_qdq("qat"), path)
    code, out, err = _run(["engine", "diff", str(path), str(graph_path("qat")),
                           "--profile-b", str(profile_path("qat")), "--layers"], capsys)
    assert code == 0, err
    rows = out.split("layer in A")[1].splitlines()[2:]
    profiled = {la["name"]: la["averageMs"] for la in json.loads(profile_path("qat").read_text())
                if isinstance(la, dict) and "averageMs" in la}
    assert len(rows) >= 30
    # The real side's column is the profile's own time; the predicted side's is the cost model's.
    row = next(r for r in rows if "QuantizeLinear_15 " in r + " ")
    a_ms, b_ms = (float(v) for v in row.split()[-3:-1])
    assert b_ms == pytest.approx(profiled["QuantizeLinear_15"], abs=5e-4)
    assert a_ms > 0
