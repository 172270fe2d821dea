"""What ``lint`` returns: findings grouped by rule, the predicted engine summary, the comparison."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from qdqkit.rules import Finding, Rule, Severity
from qdqkit.trt.cost_model import LatencyComparison
from qdqkit.trt.engine import EngineGraph
from qdqkit.trt.engine_analysis import int8_conv_outputs, layout_only, quantized_io

if TYPE_CHECKING:
    from qdqkit.engine.diff import EngineDiff


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
    # Weighted layers whose MACs are unknown (no shapes reach them): not in the totals above.
    unsized_layers: list[str] = field(default_factory=list)

    def mac_caveat(self) -> str:
        """What the MAC totals leave out, for the text reports ("" when nothing)."""
        if not self.unsized_layers:
            return ""
        shown = ", ".join(self.unsized_layers[:2]) + (", ..." if len(self.unsized_layers) > 2
                                                       else "")
        return f"; shape inference cannot size {shown}, not counted"


@dataclass
class Disagreement:
    subject: str  # a layer, a tensor or a count
    predicted: str
    real: str


@dataclass
class EngineComparison:
    """Where a predicted engine (A of the diff) and a real one (B) disagree (rule K1, K2).

    Disagreements are kept to what the prediction claims: the count of Q/DQ Reformat layers, which
    convolutions write INT8, and for matched layers whether input and output are quantized. FP16
    against FP32 is not a disagreement: under ``--best`` TensorRT picks between them by timing,
    which no static rule can.
    """

    real_engine: str
    matched_layers: int
    predicted_qdq_reformats: int
    real_qdq_reformats: int
    predicted_int8_conv_outputs: int
    real_int8_conv_outputs: int
    disagreements: list[Disagreement]

    @classmethod
    def of(cls, diff: EngineDiff) -> EngineComparison:
        predicted, real = diff.layers.a, diff.layers.b
        counts = (
            ("Q/DQ Reformat layers", diff.a.qdq_reformats, diff.b.qdq_reformats),
            ("convolutions writing INT8", int8_conv_outputs(predicted), int8_conv_outputs(real)),
        )
        disagreements = [
            Disagreement(subject, str(mine), str(theirs))
            for subject, mine, theirs in counts if mine != theirs
        ]
        for predicted_layer, real_layer in diff.layers.pairs:
            if quantized_io(predicted_layer) != quantized_io(real_layer):
                disagreements.append(Disagreement(
                    f"layer '{real_layer.name}'", quantized_io(predicted_layer),
                    quantized_io(real_layer)))
        for layer in diff.layers.only_a:
            if not layout_only(layer):
                disagreements.append(Disagreement(f"layer '{layer.name}'", "present", "absent"))
        for layer in diff.layers.only_b:
            if not layout_only(layer):
                disagreements.append(Disagreement(f"layer '{layer.name}'", "absent", "present"))
        return cls(
            real_engine=os.fspath(real.source),
            matched_layers=len(diff.layers.pairs),
            predicted_qdq_reformats=diff.a.qdq_reformats,
            real_qdq_reformats=diff.b.qdq_reformats,
            predicted_int8_conv_outputs=int8_conv_outputs(predicted),
            real_int8_conv_outputs=int8_conv_outputs(real),
            disagreements=disagreements,
        )


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
    latency: LatencyComparison | None = None  # predicted time as it is and built FP16
    # Settings ("trt", "target") taken from what quantize recorded in the model, not given.
    from_model: list[str] = field(default_factory=list)

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
