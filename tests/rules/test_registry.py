"""The rule registry: built from the units, looked up by code or name, light to import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from qdqkit.cli import main
from qdqkit.core.errors import QdqkitError
from qdqkit.report.json_output import to_jsonable
from qdqkit.rules import Finding, Severity, all_rules, rule, rules_for, units

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("onnx", "onnx_ir", "onnxruntime", "numpy", "sympy")


def test_listing_and_explaining_rules_imports_no_heavy_library() -> None:
    script = (
        "import io, sys, contextlib\n"
        "import qdqkit.rules\n"
        "qdqkit.rules.all_rules()\n"
        "from qdqkit.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['rules']); main(['rules', 'QDQ101']); main(['rules', '--json'])\n"
        f"print([m for m in sys.modules if m.split('.')[0] in {HEAVY!r}])\n"
    )
    env = {"PYTHONPATH": f"{ROOT / 'src'}:{ROOT}", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, check=True).stdout
    assert out.strip() == "[]"


def test_registry_is_in_code_order_and_every_unit_has_a_check_and_a_fix_slot() -> None:
    codes = [r.code for r in all_rules()]
    assert codes == sorted(codes) and len(codes) == len(set(codes))
    for unit in units():
        assert callable(unit.check) and (unit.fix is None or callable(unit.fix))
        assert len({r.scope for r in unit.rules}) == 1, unit.module
    assert [u.codes for u in units() if u.runs_last] == [("QDQ407",)]
    assert {r.code[:4] for r in rules_for("engine")} == {"QDQ6"}


def test_a_unit_judges_only_the_devices_it_declares() -> None:
    # Explicit-fusion rules say nothing about DLA's implicit build, DLA rules nothing about the
    # GPU; lint runs a unit only for the target it judges.
    from qdqkit.examples.graph import GraphBuilder
    from qdqkit.linting import lint
    from qdqkit.trt.versions import TARGETS

    by_target = {t: {c for u in units() if u.judges(t) for c in u.codes} for t in TARGETS}
    assert all(set(u.targets) <= set(TARGETS) and u.targets for u in units())
    assert {"QDQ103", "QDQ104", "QDQ105", "QDQ206", "QDQ412"} <= by_target["gpu"] - by_target["dla"]
    assert {"QDQ504", "QDQ505"} <= by_target["dla"] - by_target["gpu"]
    g = GraphBuilder()
    y = g.qdq(g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32, name="c"), 0.1, name="in")
    g.output(g.node("Relu", [y], name="r"))  # a Q/DQ between a conv and its ReLU
    assert "QDQ103" in lint(g.ir(), trt="10").codes()
    assert "QDQ103" not in lint(g.ir(), trt="10", target="dla").codes()


def test_a_rule_is_found_by_code_or_by_name() -> None:
    assert rule("qdq201") is rule("residual-skip-float") is rule(" QDQ201 ")
    assert rule("fp32-in-int8-engine") is rule("QDQ603")
    with pytest.raises(QdqkitError, match="qdqkit rules"):
        rule("QDQ999")


def test_rules_explains_an_engine_finding_by_its_slug(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "fp32-in-int8-engine"]) == 0
    by_name = capsys.readouterr().out
    assert main(["rules", "QDQ603"]) == 0
    assert capsys.readouterr().out == by_name and "why it costs" in by_name


def test_findings_keep_the_json_keys_of_their_command() -> None:
    model = Finding(code="QDQ201", severity=Severity.ERROR, message="m", nodes=["a"],
                    tensors=["t"], cost="c")
    assert to_jsonable(model) == {"code": "QDQ201", "severity": "error", "message": "m",
                                  "nodes": ["a"], "tensors": ["t"], "cost": "c"}
    engine = Finding(code="QDQ606", severity=Severity.INFO, message="m", layers=["L"],
                     latency_ms=0.5)
    assert to_jsonable(engine) == {"code": "qdq-reformat", "severity": "info", "message": "m",
                                   "layers": ["L"], "latency_ms": 0.5}
    assert json.loads(json.dumps(to_jsonable(rule("QDQ101"))))["fix"] == rule("QDQ101").what_to_do
