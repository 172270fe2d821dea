from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from qdqkit.cli import main
from qdqkit.examples.builder import demo_network

FIXTURES = Path(__file__).parents[1] / "fixtures" / "translate"


def test_reference_spellings_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = FIXTURES / "torch_fq_qat.onnx"
    code = main([
        "translate", "--input_onnx_models", str(model), "--output_dir", str(tmp_path),
        "--trt_calib_version", "100300", "--infer_average_pool_scales", "--infer_concat_scales",
        "--infer_mul_scales", "--calibration_type", "histogram",
        "--addtl_ops_to_infer_adjacent_scales", "Identity", "Clip", "--rename_node_outputs",
        "--add_unary_ew_scales_for_dla", "--verbose",
    ])
    assert code == 0
    assert "translated" in capsys.readouterr().out
    cache = (tmp_path / "torch_fq_qat_precision_config_calib.cache").read_text()
    assert cache.startswith("TRT-100300-EntropyCalibration2\n")


def test_kebab_aliases_several_models_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    built = tmp_path / "built.onnx"
    onnx.save(demo_network("modelopt"), built)
    code = main(["translate", "-i", str(built), str(FIXTURES / "torch_fq_qat.onnx"), "-o",
                 str(tmp_path / "out"), "--infer-concat-scales", "--trt-calib-version", "8601",
                 "--json"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert [s["qdq_left"] for s in summary] == [0, 0]
    assert len(list((tmp_path / "out").iterdir())) == 8


@pytest.mark.parametrize(
    "args,needle",
    [(["--trt_calib_version", "8.6.1"], "TensorRT version"),
     (["-i", "missing.onnx"], "no such file")],
)
def test_errors_are_one_line_exit_2(args: list[str], needle: str, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    base = ["translate", "-o", str(tmp_path)]
    if "-i" not in args:
        base += ["-i", str(FIXTURES / "torch_fq_qat.onnx")]
    assert main(base + args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_calibration_type_choices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["translate", "-i", "m.onnx", "--calibration_type", "foo"])
    capsys.readouterr()
    model = FIXTURES / "mnist_ort_qdq.onnx"
    mismatches = []
    for kind in ("max", "hist"):
        assert main(["translate", "-i", str(model), "-o", str(tmp_path / kind),
                     f"--calibration_type={kind}", "--json"]) == 0
        mismatches.append(json.loads(capsys.readouterr().out)["weight_scale_mismatches"])
    # mnist's MatMul weight was quantized per tensor: max reports it, histogram skips the check
    assert [m["node"] for m in mismatches[0]] == ["Times212"] and mismatches[1] == []


def test_same_named_inputs_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for sub in ("a", "b"):
        (tmp_path / sub / "m.onnx").write_bytes((FIXTURES / "torch_fq_qat.onnx").read_bytes())
    assert main(["translate", "-i", str(tmp_path / "a/m.onnx"), str(tmp_path / "b/m.onnx"),
                 "-o", str(tmp_path / "out")]) == 2
    assert "overwrite each other" in capsys.readouterr().err


def test_verify_and_demo_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--dir", str(tmp_path)]) == 0
    demo = capsys.readouterr().out
    assert "trtexec --onnx=" in demo and "SNR" in demo
    model = tmp_path / "demo_trt_qat.onnx"
    assert main(["verify", str(model), str(tmp_path / "translated"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert float(data["min_snr_db"]) > 40 and data["outputs"][0]["name"] == "logits"


def test_the_process_entry_point_writes_what_the_api_writes_and_exits_with_its_code(
    tmp_path: Path,
) -> None:
    # ``python -m qdqkit`` leaves the graphs to the process exit (core.gc_pause): every output is
    # still complete, two models in one process included, and the exit codes are unchanged.
    import os
    import subprocess
    import sys

    from qdqkit.translation import translate

    built = tmp_path / "built.onnx"
    onnx.save(demo_network("modelopt"), built)
    models = [str(built), str(FIXTURES / "torch_fq_qat.onnx")]
    for model in models:
        translate(model, tmp_path / "api")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(root / "src"), os.environ.get("PYTHONPATH", "")])}
    ran = subprocess.run([sys.executable, "-m", "qdqkit", "translate", "-i", *models, "-o",
                          str(tmp_path / "cli")], capture_output=True, text=True, env=env)
    assert ran.returncode == 0, ran.stderr
    written = sorted(p.name for p in (tmp_path / "cli").iterdir())
    assert written == sorted(p.name for p in (tmp_path / "api").iterdir()) and len(written) == 8
    for name in written:
        assert (tmp_path / "cli" / name).read_bytes() == (tmp_path / "api" / name).read_bytes()
    missing = subprocess.run([sys.executable, "-m", "qdqkit", "translate", "-i",
                              str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "no")],
                             capture_output=True, text=True, env=env)
    assert missing.returncode == 2 and missing.stderr.startswith("qdqkit: error:")
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("given", [None, "3"])
def test_the_command_keeps_openblas_to_one_thread_unless_the_user_chose(
    given: str | None, tmp_path: Path
) -> None:
    # translate does no linear algebra: OpenBLAS's thread pool would only spin at start-up.
    import os
    import subprocess
    import sys

    model = tmp_path / "m.onnx"
    onnx.save(demo_network("modelopt"), model)
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env["PYTHONPATH"] = os.pathsep.join([str(root / "src"), os.environ.get("PYTHONPATH", "")])
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    script = ("import os, sys; from qdqkit.cli import main; "
              "code = main(['translate', '-i', sys.argv[1], '-o', sys.argv[2]]); "
              "print(os.environ.get('OPENBLAS_NUM_THREADS'), code)")
    ran = subprocess.run([sys.executable, "-c", script, str(model), str(tmp_path / "out")],
                         capture_output=True, text=True, env=env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines()[-1] == f"{given or '1'} 0"


def test_the_model_is_positional_as_in_every_other_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["translate", str(FIXTURES / "torch_fq_qat.onnx"), "-o", str(tmp_path)]) == 0
    assert (tmp_path / "torch_fq_qat_noqdq.onnx").is_file()
    assert main(["translate", "-o", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "no model to translate" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "none").exists()
