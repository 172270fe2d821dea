"""What ``quantize`` returns and what ``OUT.quant.json`` holds (a published format).

``OUT.quant.json``: ``format`` (``qdqkit.quant/1``), ``options`` (everything that shaped the
output), ``calibration`` (data, samples, whether it was random), ``tensors`` (per quantized
tensor: scale, scale group, method, observed range, clipped fraction), ``weighted`` (per weighted
op: quantized or why not, MACs), ``float_nodes`` (what stayed float and why: plugins, exclusions),
``fp32_nodes`` (the float remainder kept FP32 and why), ``engine`` (the predicted engine summary,
with the input shapes it was predicted at)
and ``warnings``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import onnx_ir as ir

from qdqkit.linting.result import EngineSummary
from qdqkit.quantization.calibrate import TensorScale

FORMAT = "qdqkit.quant/1"


@dataclass(frozen=True)
class WeightedReport:
    node: str
    op_type: str
    quantized: bool
    reason: str
    macs: int | None

    def as_dict(self) -> dict[str, object]:
        return {"node": self.node, "op_type": self.op_type, "quantized": self.quantized,
                "why_not": self.reason or None, "macs": self.macs}


@dataclass
class QuantizeResult:
    """The quantized model (``model``), where it was written, and the evidence for every choice."""

    source: str
    output: str | None
    report: str | None
    options: dict[str, Any]
    calibration: dict[str, Any]
    tensors: list[TensorScale]
    weighted: list[WeightedReport]
    int8_ops: list[str]
    float_nodes: dict[str, str]
    fp32_nodes: dict[str, str]
    engine: EngineSummary
    lint_errors: int
    lint_warnings: dict[str, int]
    trtexec: str
    seconds: float
    warnings: list[str] = field(default_factory=list)
    # Wall seconds per step (load, plan, calibration session and passes, settle, lint, write):
    # in ``--json`` beside ``seconds``, never in the report file, which stays deterministic.
    phases: dict[str, float] = field(default_factory=dict)
    model: ir.Model | None = field(default=None, repr=False)
    # The input shapes the engine was predicted at (``--shapes``, else the data's first batch);
    # None when the model fixes every dimension.
    judged_shapes: dict[str, list[int]] | None = None

    @property
    def int8_mac_share(self) -> float | None:
        """INT8 share of MACs in the predicted engine, at the calibration data's input shapes;
        from the weighted ops' MACs at the declared shapes when the engine has no MAC count."""
        if self.engine.int8_mac_share is not None:
            return self.engine.int8_mac_share
        total = sum(w.macs or 0 for w in self.weighted)
        int8 = sum(w.macs or 0 for w in self.weighted if w.quantized)
        return int8 / total if total else None

    @property
    def exit_code(self) -> int:
        """0 when the output lints without errors, 1 otherwise (a script can gate on it)."""
        return 1 if self.lint_errors else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "model": self.source,
            "output": self.output,
            "options": self.options,
            "calibration": self.calibration,
            "int8_mac_share": self.int8_mac_share,
            "tensors": [t.as_dict() for t in self.tensors],
            "weighted": [w.as_dict() for w in self.weighted],
            "int8_ops": self.int8_ops,
            "float_nodes": self.float_nodes,
            "fp32_nodes": self.fp32_nodes,
            "engine": {
                "layers_by_precision": self.engine.layers_by_precision,
                "reformats": self.engine.reformats,
                "qdq_reformats": self.engine.qdq_reformats,
                "int8_mac_share": self.engine.int8_mac_share,
                "input_shapes": self.judged_shapes,
                "lint_errors": self.lint_errors,
                "lint_warnings": self.lint_warnings,
            },
            "trtexec": self.trtexec,
            "seconds": round(self.seconds, 3),
            "phases": {name: round(value, 3) for name, value in self.phases.items()},
            "warnings": self.warnings,
        }

    def report_json(self) -> dict[str, Any]:
        """``OUT.quant.json``: as ``to_json`` without the run time, so the file is deterministic."""
        data = self.to_json()
        data.pop("seconds")
        data.pop("phases")
        return data
