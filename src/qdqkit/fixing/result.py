"""What ``fix`` returns: what it changed rule by rule and node by node, the engine before -> after."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import onnx_ir as ir

from qdqkit.linting.result import EngineSummary


@dataclass(frozen=True)
class EngineFigures:
    """The predicted engine's figures ``fix`` is judged by."""

    reformats: int
    int8_output_layers: int
    int8_conv_outputs: int
    convolutions: int
    int8_mac_share: float | None
    layers: int

    @classmethod
    def of(cls, summary: EngineSummary, int8_convs: int, convs: int) -> EngineFigures:
        return cls(summary.reformats, summary.int8_output_layers, int8_convs, convs,
                   summary.int8_mac_share, summary.layers)

    def to_json(self) -> dict[str, Any]:
        return {"reformats": self.reformats, "int8_output_layers": self.int8_output_layers,
                "int8_conv_outputs": self.int8_conv_outputs, "convolutions": self.convolutions,
                "int8_mac_share": self.int8_mac_share, "layers": self.layers}


@dataclass(frozen=True)
class FixAction:
    """One finding's fix: the rule, the finding, and each change it made (empty: nothing left)."""

    code: str
    rule: str
    finding: str
    changes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "rule": self.rule, "finding": self.finding,
                "changes": list(self.changes)}


@dataclass(frozen=True)
class Unfixed:
    """A fixable finding still there after ``fix``, and why."""

    code: str
    message: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message, "reason": self.reason}


@dataclass
class FixResult:
    source: str
    output: str | None
    dry_run: bool
    trt: str
    target: str
    rounds: int
    prepared: list[str]  # weight-path and bias rewrites made before the rule fixes
    actions: list[FixAction]
    skipped: list[str]  # repairs left out for want of a scale, with the reason
    unfixed: list[Unfixed]
    before: EngineFigures
    after: EngineFigures
    fixable_before: int
    fixable_after: int
    seconds: float = 0.0
    model: ir.Model | None = field(default=None, repr=False)
    # Settings ("trt", "target") taken from what quantize recorded in the model, not given.
    from_model: list[str] = field(default_factory=list)
    # Nodes settled float because their INT8 region does not pay for its Reformats -> why.
    unpaid_float: dict[str, str] = field(default_factory=dict)
    unpaid_changes: list[str] = field(default_factory=list)  # what settling them changed
    # Why the Reformats were not weighed against INT8 savings (rule 4), when they were not.
    unweighed: str = ""

    @property
    def changed(self) -> bool:
        return bool(self.prepared or self.unpaid_changes or any(a.changes for a in self.actions))

    @property
    def nothing_to_fix(self) -> bool:
        return self.fixable_before == 0 and not self.prepared

    @property
    def exit_code(self) -> int:
        """0 when nothing fixable is left, 1 when some fixable finding remains."""
        return 1 if self.unfixed else 0

    def by_rule(self) -> dict[str, list[FixAction]]:
        grouped: dict[str, list[FixAction]] = {}
        for action in self.actions:
            if action.changes:
                grouped.setdefault(action.code, []).append(action)
        return dict(sorted(grouped.items()))

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source, "output": self.output, "dry_run": self.dry_run,
            "trt": self.trt, "target": self.target, "from_model": self.from_model,
            "rounds": self.rounds,
            "nothing_to_fix": self.nothing_to_fix, "changed": self.changed,
            "prepared": self.prepared, "unpaid_float": self.unpaid_float,
            "unpaid_changes": self.unpaid_changes, "unweighed": self.unweighed or None,
            "fixes": {code: [a.to_json() for a in actions]
                      for code, actions in self.by_rule().items()},
            "skipped": self.skipped, "unfixed": [u.to_json() for u in self.unfixed],
            "fixable_before": self.fixable_before, "fixable_after": self.fixable_after,
            "engine": {"before": self.before.to_json(), "after": self.after.to_json()},
            "exit_code": self.exit_code,
        }
