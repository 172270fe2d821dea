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
