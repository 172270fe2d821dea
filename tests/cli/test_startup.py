"""Commands that read no ONNX start without the model stack.

``--help``, ``rules`` and ``engine report|draw|diff`` on JSON files must not import onnx, onnx-ir,
onnxruntime, sympy or numpy: those take from 0.1 s (numpy) to 0.6 s (onnx-ir, which pulls in
sympy) before a command does any work, while these commands finish in about 0.1 s without them.
Each case runs in a fresh interpreter, the only way to see what a command imports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine.fixture_files import graph_path, profile_path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("onnx", "onnx_ir", "onnxruntime", "sympy", "numpy")
# Runs one command in-process, then reports its exit code and which heavy packages it loaded.
WRAPPER = f"""
import json, sys
from qdqkit.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
heavy = [name for name in {HEAVY!r} if name in sys.modules]
sys.stderr.write("\\n" + json.dumps({{"code": code, "heavy": heavy}}) + "\\n")
"""


def _heavy_imports(argv: list[str]) -> list[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", WRAPPER, *argv], capture_output=True, text=True,
                          env=env, cwd=ROOT)
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, proc.stderr
    return list(report["heavy"])


def _engine_cases(tmp: Path) -> dict[str, list[str]]:
    graph, profile = str(graph_path("qat")), str(profile_path("qat"))
    other = str(graph_path("qat-residual"))
    return {
        "engine report": ["engine", "report", graph, "--profile", profile],
        "engine report --json": ["engine", "report", graph, "--json"],
        "engine draw html": ["engine", "draw", graph, "--profile", profile, "-o", str(tmp / "e.html")],
        "engine draw svg": ["engine", "draw", graph, "-o", str(tmp / "e.svg")],
        "engine diff": ["engine", "diff", graph, other, "--json"],
    }


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["engine", "--help"]],
                         ids=["--help", "--version", "engine --help"])
def test_help_imports_no_heavy_package(argv: list[str]) -> None:
    assert _heavy_imports(argv) == []


@pytest.mark.parametrize("case", sorted(_engine_cases(Path("."))))
def test_engine_commands_on_json_import_no_heavy_package(case: str, tmp_path: Path) -> None:
    assert _heavy_imports(_engine_cases(tmp_path)[case]) == []


@pytest.mark.parametrize("argv", [["rules"], ["rules", "QDQ201", "--json"]],
                         ids=["rules", "rules QDQ201"])
def test_rules_imports_no_heavy_package(argv: list[str]) -> None:
    assert _heavy_imports(argv) == []
