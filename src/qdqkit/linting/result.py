"""What ``lint`` returns: findings grouped by rule, the predicted engine summary, the comparison."""

from __future__ import annotations

from dataclasses import dataclass, field

from qdqkit.linting.catalog import Rule, Severity
from qdqkit.trt.engine import EngineGraph


@dataclass
class Finding:
    code: str
    severity: Severity
    message: str  # what and where, one line
    nodes: list[str] = field(default_factory=list)  # ONNX node names
    tensors: list[str] = field(default_factory=list)  # ONNX tensor names
    cost: str = ""  # the predicted cost, e.g. "+1 Reformat layer; block layer2.1 writes FP16"


@dataclass
class RuleGroup:
    code: str
    name: str
    severity: Severity
    summary: str
    rule_id: str
    fixable: bool
    findings: list[Finding]

    @classmethod
    def of(cls, rule: Rule, findings: list[Finding]) -> RuleGroup:
        return cls(rule.code, rule.name, rule.severity, rule.summary, rule.rule_id, rule.fixable,
                   findings)


@dataclass
class EngineSummary:
    layers: int
    layers_by_precision: dict[str, int]
    reformats: int
    qdq_reformats: int
    int8_macs: int | None
    total_macs: int | None
    int8_mac_share: float | None
    elided_nodes: int
    int8_output_layers: int = 0  # compute layers that write INT8 (their Q fused)
    devices: dict[str, int] = field(default_factory=dict)


@dataclass
class Disagreement:
    subject: str  # a layer, a tensor or a count
    predicted: str
    real: str


@dataclass
class EngineComparison:
    real_engine: str
    matched_layers: int
    predicted_qdq_reformats: int
    real_qdq_reformats: int
    predicted_int8_conv_outputs: int
    real_int8_conv_outputs: int
    disagreements: list[Disagreement]


@dataclass
class LintResult:
    model: str
    trt: str
    target: str
    quantized: bool
    groups: list[RuleGroup]
    summary: EngineSummary
    engine: EngineGraph
    comparison: EngineComparison | None = None

    def count(self, severity: Severity) -> int:
        # A finding may be milder than its rule (several Qs with one scale cost nothing).
        return sum(1 for g in self.groups for f in g.findings if f.severity == severity)

    @property
    def errors(self) -> int:
        return self.count(Severity.ERROR)

    @property
    def warnings(self) -> int:
        return self.count(Severity.WARNING)

    @property
    def exit_code(self) -> int:
        """1 when there are errors (so CI can gate on it), 0 otherwise."""
        return 1 if self.errors else 0

    def codes(self) -> list[str]:
        return [g.code for g in self.groups]

    def findings(self, code: str) -> list[Finding]:
        return [f for g in self.groups if g.code == code for f in g.findings]
