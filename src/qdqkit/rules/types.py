"""What a rule is, what it finds, and the shape of a rule unit's check and fix.

This module imports nothing heavy (no onnx, onnx-ir, numpy): ``qdqkit rules`` lists and explains the
catalog without paying for the libraries the checks need.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

if TYPE_CHECKING:
    import onnx_ir as ir


class Severity(str, enum.Enum):
    ERROR = "error"  # breaks a fusion or the build: the engine is slower (or fails) for certain
    WARNING = "warning"  # likely costs Reformats or precision; verify on an engine
    INFO = "info"  # a fact worth knowing; nothing to fix by default

    def __str__(self) -> str:
        return self.value


# What a rule reads: "model" rules run in ``lint`` over an ONNX model and its predicted engine,
# "engine" rules run in ``engine report`` over any engine, predicted or real.
Scope = Literal["model", "engine"]


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One catalog entry. Codes never change meaning once published."""

    code: str  # QDQ101
    name: str  # weighted-op-half-quantized; also accepted wherever a code is
    severity: Severity
    summary: str
    why: str  # which fusion breaks, which Reformat appears
    what_to_do: str
    fixable: bool  # whether ``qdqkit fix`` is meant to apply it
    rule_id: str  # the entry of docs/tensorrt-qdq-rules.md it comes from
    how_it_checks: str  # how the check decides, in a few lines
    scope: Scope = "model"

    @property
    def fix(self) -> str:
        """``what_to_do`` under its published JSON key."""
        return self.what_to_do

    @property
    def check(self) -> str:
        """``how_it_checks`` under its published JSON key."""
        return self.how_it_checks

    def to_json(self) -> dict[str, Any]:
        # The keys `qdqkit rules --json` has always printed, in their order.
        return {
            "code": self.code, "name": self.name, "severity": self.severity,
            "summary": self.summary, "why": self.why, "fix": self.what_to_do,
            "fixable": self.fixable, "rule_id": self.rule_id, "check": self.how_it_checks,
        }


@dataclass
class Finding:
    """One place a rule fired, anchored by names rather than by text to parse back.

    A model finding names ONNX nodes and tensors and says what it costs; an engine finding names
    engine layers and, with a profile, the time they take.
    """

    code: str
    severity: Severity  # may be milder than its rule's (several Qs with one scale cost nothing)
    message: str  # what and where, one line
    nodes: list[str] = field(default_factory=list)  # ONNX node names
    tensors: list[str] = field(default_factory=list)  # ONNX tensor names
    layers: list[str] = field(default_factory=list)  # engine layer names
    cost: str = ""  # the predicted cost, e.g. "+1 Reformat layer; block layer2.1 writes FP16"
    latency_ms: float | None = None  # measured time of ``layers``, when profiled

    @property
    def rule(self) -> Rule:
        from qdqkit.rules.registry import rule

        return rule(self.code)

    def to_json(self) -> dict[str, Any]:
        # Each command keeps the finding keys it has always printed.
        if self.rule.scope == "engine":
            return {"code": self.rule.name, "severity": self.severity, "message": self.message,
                    "layers": self.layers, "latency_ms": self.latency_ms}
        return {"code": self.code, "severity": self.severity, "message": self.message,
                "nodes": self.nodes, "tensors": self.tensors, "cost": self.cost}


# A check reads a context (``LintContext`` for model rules, ``EngineContext`` for engine rules) and
# yields findings; a check that runs last also receives every finding the others made.
Check = Callable[[Any], Iterable[Finding]]
LastCheck = Callable[[Any, Sequence[Finding]], Iterable[Finding]]
# A fix receives one finding and the model as a mutable onnx-ir ``Model``, rewrites the model in
# place, and says whether it changed anything (the ``fix`` command fills these in).
Fix = Callable[[Finding, "ir.Model"], bool]


def replace_by_placement(finding: Finding, model: ir.Model) -> bool:
    """The fix of the placement rules: re-place the Q/DQ on the finding's nodes and tensors the
    way the one placement policy places them, with the scales the model carries
    (``passes.replace_qdq``; imported here, when a fix runs, not when the catalog loads)."""
    from qdqkit.passes.replace_qdq import repair_finding

    return repair_finding(finding, model)


@dataclass(frozen=True)
class RuleUnit:
    """One rule (or a small family sharing one check): its metadata, its check, its fix slot."""

    module: str
    rules: tuple[Rule, ...]
    check: Check | LastCheck
    fix: Fix | None = None
    runs_last: bool = False  # receives every other unit's findings (QDQ407)
    # The devices whose engines the check judges (model units): a rule about explicit fusion
    # breaks has nothing to say about DLA, built implicitly from the translation, and a DLA rule
    # nothing about the GPU.
    targets: tuple[str, ...] = ("gpu", "dla")

    @property
    def scope(self) -> Scope:
        return self.rules[0].scope

    def run(self, ctx: Any, earlier: Sequence[Finding] = ()) -> Iterable[Finding]:
        """The unit's findings in ``ctx``; ``earlier`` is what the other units found, for a unit
        that runs last."""
        if self.runs_last:
            return cast(LastCheck, self.check)(ctx, earlier)
        return cast(Check, self.check)(ctx)

    def judges(self, target: str) -> bool:
        """Whether the check applies to an engine built for ``target``."""
        return target in self.targets

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(r.code for r in self.rules)
