"""``qdqkit fix`` end to end: what it prints, what it writes, exit codes, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import onnx_ir as ir
import pytest

from qdqkit.cli import main
from tests.fixing import producers


def _save(model: ir.Model, path: Path) -> Path:
    ir.save(model, path)
    return path


@pytest.fixture
def nncf(tmp_path: Path) -> Path:
    return _save(producers.nncf(), tmp_path / "nncf.onnx")


def test_fix_prints_rule_by_rule_and_the_engine_before_and_after(
    nncf: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "fixed.onnx"
    assert main(["fix", str(nncf), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"written to {out}" in text and "fixable findings 2 -> 0" in text
    assert "QDQ202 residual-conv-branch-quantized:" in text
    assert "'c2_bn_out': Q/DQ for [add] -> [none]" in text
    assert "predicted engine before -> after:" in text and "Reformat layers" in text
    assert "INT8 share of MACs    100.0% -> 100.0%" in text
    assert out.exists()
    assert main(["fix", str(out), "-o", str(tmp_path / "again.onnx")]) == 0
    assert "nothing to fix" in capsys.readouterr().out


def test_dry_run_writes_nothing_and_json_lists_every_change(
    nncf: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "fixed.onnx"
    assert main(["fix", str(nncf), "-o", str(out), "--dry-run", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert not out.exists() and report["dry_run"] and report["output"] is None
    assert report["fixable_before"] == 2 and report["fixable_after"] == 0
    assert report["fixes"]["QDQ202"][0]["changes"]
    assert report["engine"]["before"]["reformats"] >= report["engine"]["after"]["reformats"]
    assert report["exit_code"] == 0


def test_a_fix_needing_data_is_skipped_with_exit_1_and_done_with_calib(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = _save(producers.needs_calibration(), tmp_path / "half.onnx")
    assert main(["fix", str(model), "-o", str(tmp_path / "a.onnx")]) == 1
    text = capsys.readouterr().out
    assert "skipped: no scale for 'tanh_out'" in text and "QDQ101" in text
    code = main(["fix", str(model), "-o", str(tmp_path / "b.onnx"), "--calib", "random",
                 "--calib-limit", "2", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert "QDQ101" in report["fixes"] and report["skipped"] == []
    assert code == report["exit_code"]


@pytest.mark.parametrize("argv, message", [
    (["fix", "missing.onnx", "-o", "out.onnx"], "missing.onnx"),
    (["fix", "{model}"], "give -o OUT.onnx"),
    (["fix", "{model}", "-o", "out.txt"], "must be an .onnx file"),
    (["fix", "{model}", "-o", "out.onnx", "--rules", "QDQ999"], "no lint rule 'QDQ999'"),
    (["fix", "{model}", "-o", "out.onnx", "--rules", "QDQ501"], "has no fix"),
    (["fix", "{model}", "-o", "{model}"], "{model}"),
])
def test_bad_input_is_one_line_and_exit_2(
    nncf: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    before = nncf.read_bytes()
    args = [a.format(model=nncf) if "{model}" in a else
            (str(tmp_path / a) if a.endswith((".onnx", ".txt")) else a) for a in argv]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("qdqkit: error:") and "Traceback" not in err
    assert message.format(model=nncf.name) in err
    assert nncf.read_bytes() == before
