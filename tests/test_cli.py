from __future__ import annotations

import subprocess
import sys

from qdqkit import __version__
from qdqkit.cli import main


def test_version_and_help() -> None:
    proc = subprocess.run([sys.executable, "-m", "qdqkit", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == f"qdqkit {__version__}"
    proc = subprocess.run([sys.executable, "-m", "qdqkit", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "inspect" in proc.stdout


def test_no_command_prints_help_and_exits_2(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main([]) == 2
    assert "usage: qdqkit" in capsys.readouterr().err


def test_public_api_names_resolve_after_every_submodule_is_imported() -> None:
    """No subpackage shares a public function's name, so importing it cannot shadow the function."""
    import importlib
    import pkgutil

    import qdqkit

    for info in pkgutil.walk_packages(qdqkit.__path__, "qdqkit."):
        if info.name != "qdqkit.__main__":
            importlib.import_module(info.name)
    for name in qdqkit.__all__:
        value = getattr(qdqkit, name)
        assert value is not None
        assert not isinstance(value, type(qdqkit)), f"qdqkit.{name} is a module, not the API object"
    for name in ("lint", "translate", "verify", "inspect_model", "predict_engine", "diff_engines"):
        assert callable(getattr(qdqkit, name))


def _one_line_error(args: list[str]) -> str:
    proc = subprocess.run([sys.executable, "-m", "qdqkit", *args], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    return proc.stderr


def test_output_folder_that_is_a_file_is_a_one_line_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import onnx

    from qdqkit.examples.builder import demo_network

    model = tmp_path / "m.onnx"
    onnx.save(demo_network(), model)
    blocker = tmp_path / "out"
    blocker.write_text("a file where the output folder should go")
    err = _one_line_error(["translate", "-i", str(model), "-o", str(blocker)])
    assert "cannot write outputs there" in err and str(blocker) in err
    assert blocker.read_text().startswith("a file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "out"]


def test_verify_checks_the_qdq_model_and_the_inputs_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    proc = subprocess.run(
        [sys.executable, "-m", "qdqkit", "demo", "--dir", str(tmp_path / "demo")],
        capture_output=True, text=True, check=True,
    )
    assert "dB SNR" in proc.stdout
    # A Q/DQ model file that matches the bundle's name but is empty.
    (tmp_path / "other").mkdir()
    empty = tmp_path / "other" / "demo_trt_qat.onnx"
    empty.write_bytes(b"")
    err = _one_line_error(["verify", str(empty), str(tmp_path / "demo" / "translated")])
    assert "the file is empty" in err
    not_npz = tmp_path / "inputs.npz"
    not_npz.write_text("{}")
    err = _one_line_error(
        ["verify", str(tmp_path / "demo" / "demo_trt_qat.onnx"), str(tmp_path / "demo" / "translated"),
         "--inputs", str(not_npz)]
    )
    assert "not a readable .npz file" in err
