"""The command line as a whole. Commands run in-process through ``main(argv)``; only the tests
that prove the installed entry points (``python -m qdqkit``, the ``qdqkit`` script) start one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from qdqkit import __version__
from qdqkit.cli import main


def test_version_through_python_dash_m() -> None:
    proc = subprocess.run([sys.executable, "-m", "qdqkit", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == f"qdqkit {__version__}"


def test_version_through_the_console_script() -> None:
    script = Path(sys.executable).with_name("qdqkit")
    if not script.exists():
        pytest.skip("the qdqkit console script is not installed (pip install -e .)")
    proc = subprocess.run([str(script), "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == f"qdqkit {__version__}"


def test_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("inspect", "lint", "rules", "translate", "verify", "engine"))


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


def _one_line_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


def test_output_folder_that_is_a_file_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import onnx

    from qdqkit.examples.builder import demo_network

    model = tmp_path / "m.onnx"
    onnx.save(demo_network(), model)
    blocker = tmp_path / "out"
    blocker.write_text("a file where the output folder should go")
    err = _one_line_error(["translate", "-i", str(model), "-o", str(blocker)], capsys)
    assert "cannot write outputs there" in err and str(blocker) in err
    assert blocker.read_text().startswith("a file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "out"]


def test_verify_checks_the_qdq_model_and_the_inputs_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--dir", str(tmp_path / "demo")]) == 0
    assert "reproduces the Q/DQ model exactly" in capsys.readouterr().out
    # A Q/DQ model file that matches the bundle's name but is empty.
    (tmp_path / "other").mkdir()
    empty = tmp_path / "other" / "demo_trt_qat.onnx"
    empty.write_bytes(b"")
    err = _one_line_error(["verify", str(empty), str(tmp_path / "demo" / "translated")], capsys)
    assert "the file is empty" in err
    not_npz = tmp_path / "inputs.npz"
    not_npz.write_text("{}")
    err = _one_line_error(
        ["verify", str(tmp_path / "demo" / "demo_trt_qat.onnx"), str(tmp_path / "demo" / "translated"),
         "--inputs", str(not_npz)], capsys
    )
    assert "not a readable .npz" in err
