"""``qdqkit quantize`` on the command line: summary, --json, exit codes, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from qdqkit.cli import main
from tests.quantization.float_models import calibration_batches, resnet, transformer


@pytest.fixture
def model_and_data(tmp_path: Path) -> tuple[Path, Path]:
    builder = resnet()
    model = builder.save(tmp_path / "resnet.onnx")
    data = tmp_path / "calib.npy"
    np.save(data, np.concatenate([b["images"] for b in calibration_batches(builder, 4)]))
    return model, data


def test_summary_names_everything_a_user_checks(model_and_data, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    model, data = model_and_data
    out = tmp_path / "int8.onnx"
    code = main(["quantize", str(model), "-o", str(out), "--calib", str(data), "--trt", "10"])
    text = capsys.readouterr().out
    assert code == 0 and out.exists() and (tmp_path / "int8.quant.json").exists()
    for needle in ("calibration   4 samples", "INT8 MACs     100.0%", "engine        TensorRT 10",
                   "lint          0 errors", f"trtexec --onnx={out} --int8 --fp16",
                   "by output     output error ", "the per-tensor picks' on 4 calibration samples"):
        assert needle in text


def test_json_output_and_fp32_listing(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    builder = transformer()
    model = builder.save(tmp_path / "t.onnx")
    data = tmp_path / "t.npz"
    np.savez(data, tokens=np.concatenate([b["tokens"] for b in calibration_batches(builder, 3)]))
    code = main(["quantize", str(model), "-o", str(tmp_path / "t8.onnx"), "--calib", str(data),
                 "--json", "--method", "percentile", "--percentile", "99.9"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["options"]["percentile"] == 99.9 and report["options"]["trt"] == "11"
    assert set(report["fp32_nodes"]) == {"layernormalization3", "layernormalization29"}
    assert report["trtexec"].startswith("trtexec --onnx=")


def test_random_calibration_warns(model_and_data, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    model, _ = model_and_data
    code = main(["quantize", str(model), "-o", str(tmp_path / "r.onnx"), "--calib", "random",
                 "--calib-limit", "2"])
    assert code == 0
    assert "warning: calibrated on random data" in capsys.readouterr().out


@pytest.mark.parametrize("argv_tail,message", [
    ([], "no calibration data"),
    (["--calib", "missing.npy"], "no such file"),
    (["--calib", "random", "--shapes", "images:1xAx3"], "--shapes"),
    (["--calib", "random", "--preprocess", "size=big"], "--preprocess"),
])
def test_bad_input_exits_2_with_one_line(model_and_data, tmp_path: Path, capsys,  # type: ignore[no-untyped-def]
                                         argv_tail: list[str], message: str) -> None:
    model, _ = model_and_data
    out = tmp_path / "never.onnx"
    code = main(["quantize", str(model), "-o", str(out), *argv_tail])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()


def test_exclude_accepts_comma_lists(model_and_data, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    model, data = model_and_data
    code = main(["quantize", str(model), "-o", str(tmp_path / "x.onnx"), "--calib", str(data),
                 "--exclude", "Gemm,conv1*", "--json"])
    report = json.loads(capsys.readouterr().out)
    floats = [w["node"] for w in report["weighted"] if not w["quantized"]]
    assert code == 0 and "fc23" in floats and any(n.startswith("conv1") for n in floats)
