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


def test_public_api_names_resolve() -> None:
    import qdqkit

    for name in qdqkit.__all__:
        assert getattr(qdqkit, name) is not None
