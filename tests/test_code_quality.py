"""The house rules that keep the code readable: ruff and mypy clean, no reads of files outside."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The workspace folder beside a checkout, which a user's clone does not have; spelled in two parts
# so this file does not match its own search.
OUTSIDE_FOLDER = "../" + "shared"


def _tool(name: str) -> list[str]:
    if shutil.which(name) is None and subprocess.run(
        [sys.executable, "-m", name, "--version"], capture_output=True
    ).returncode:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]')")
    return [sys.executable, "-m", name]


def test_ruff_clean() -> None:
    proc = subprocess.run(
        [*_tool("ruff"), "check", "src", "tests", "benchmarks"], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_clean() -> None:
    proc = subprocess.run([*_tool("mypy")], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_sources_never_read_outside_the_repo() -> None:
    offenders = [
        str(p.relative_to(ROOT))
        for folder in ("src", "tests", "benchmarks")
        for p in (ROOT / folder).rglob("*.py")
        if OUTSIDE_FOLDER in p.read_text(encoding="utf-8")
    ]
    assert offenders == []


def test_layers_import_one_way() -> None:
    """The layer contract in pyproject.toml (import-linter): nothing imports from a layer above."""
    if subprocess.run([sys.executable, "-c", "import importlinter"], capture_output=True).returncode:
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
