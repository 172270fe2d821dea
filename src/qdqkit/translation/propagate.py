"""Scale propagation: give tensors without a Q their neighbours' scales, to a fixpoint.

Implicit INT8 needs a scale on both sides of every INT8 layer; the Q/DQ model only has them where a
Q sat. We copy scales across ops that do not change the range (the reference's op set, Identity and
Dropout, plus the ops its flags enable), give a Concat input that only the Concat reads the
output's scale, and derive scales across Sigmoid, HardSigmoid and Mul. Unlike the reference we sweep
forward and
backward until nothing changes, never overwrite a scale (a Q's own scale always wins), never give a
graph output a propagated scale, and refuse derived scales that are not finite, positive and plausible.
Each sweep is one pass over the nodes, so the whole is linear in graph size times a small sweep count.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import onnx_ir as ir

from qdqkit.passes.scales import ScaleOrigin, ScaleTable

# The reference's op set, plus the two pure copies (exporters such as paddle2onnx put an
# Identity after almost every op): a copy's output holds its input's values, so one scale fits
# both, and without it every copy between two quantized tensors would run FP16 and round the
# values the next Q quantizes.
DEFAULT_OPS = frozenset({"MaxPool", "Flatten", "Relu", "Pad", "Transpose", "Reshape", "Squeeze",
                         "Sigmoid", "Identity", "Dropout"})
POOL_OPS = frozenset({"AveragePool", "GlobalAveragePool", "ReduceMean"})
# Averages never exceed their input's range, but the input's range can be far wider than the
# average's: copying an average's scale back onto its input clips it (measured with verify: 21.9 dB
# on a torch QAT model where forward-only keeps 141 dB). So these propagate forward only.
FORWARD_ONLY_OPS = POOL_OPS
# amax = 127 * scale; beyond these bounds a derived scale says more about float rounding than range.
_MIN_SCALE, _MAX_SCALE = 1e-12, 1e4
# A Sigmoid output amax this close to 1 is saturated: its input range cannot be recovered.
_SIGMOID_SATURATED = 0.999
_MAX_SWEEPS = 64


@dataclass
class PropagationOptions:
    average_pool: bool = False
    concat: bool = False
    mul: bool = False
    extra_ops: tuple[str, ...] = ()

    def op_set(self) -> frozenset[str]:
        ops = set(DEFAULT_OPS) | set(self.extra_ops)
        if self.average_pool:
            ops |= POOL_OPS
        if self.concat:
            ops.add("Concat")
        if self.mul:
            ops.add("Mul")
        return frozenset(ops)


def as_float32(value: float) -> float:
    """Scales are stored as float32 values so the JSON and the cache say the same number."""
    return float(np.float32(value))


def plausible(scale: float) -> bool:
    return math.isfinite(scale) and _MIN_SCALE <= scale <= _MAX_SCALE


@dataclass
class _Propagator:
    scales: ScaleTable
    ops: frozenset[str]
    fixed: set[ir.Value] = field(default_factory=set)
    changed: int = 0

    def can_receive(self, value: ir.Value | None) -> bool:
        if value is None or value in self.scales or value.is_graph_output():
            return False
        if value.const_value is not None:
            return False
        producer = value.producer()
        return not (producer is not None and producer.op_type == "Constant")

    def give(self, value: ir.Value, scale: float, rule: str) -> None:
        scale = as_float32(scale)
        if plausible(scale):
            self.scales.set(value, scale, ScaleOrigin.PROPAGATED, rule)
            self.changed += 1

    def forward(self, node: ir.Node) -> None:
        op = node.op_type
        if op not in self.ops or not node.outputs or not node.inputs:
            return
        out = node.outputs[0]
        if not self.can_receive(out):
            return
        if op == "Concat":
            known = [s for s in (self.scales.get(v) for v in node.inputs) if s is not None]
            if known:
                self.give(out, max(known), "Concat: largest input scale")
        elif op == "Sigmoid":
            if "Mul" in self.ops and any(u.node.op_type == "Mul" for u in out.uses()):
                self.give(out, 1.0 / 127.0, "Sigmoid feeding Mul: amax 1")
                self.fixed.add(out)
        elif op == "HardSigmoid":
            scale = self.scales.get(node.inputs[0])
            if scale is not None:
                alpha, beta = _hard_sigmoid_params(node)
                amax = min(1.0, max(abs(beta + alpha * scale * 127.0),
                                    abs(beta - alpha * scale * 127.0)))
                self.give(out, amax / 127.0, "HardSigmoid: range of the input mapped")
        elif op != "Mul":
            scale = self.scales.get(node.inputs[0])
            if scale is not None:
                self.give(out, scale, f"{op}: copied from input")

    def backward(self, node: ir.Node) -> None:
        op = node.op_type
        if op == "Concat" and op not in self.ops and node.outputs and node.inputs:
            self._concat_sole_inputs(node)
            return
        if op not in self.ops or not node.outputs or not node.inputs:
            return
        out_scale = self.scales.get(node.outputs[0])
        if out_scale is None:
            return
        if op == "Concat":
            for value in node.inputs:
                if self.can_receive(value):
                    assert value is not None
                    self.give(value, out_scale, "Concat: output scale")
        elif op == "Mul":
            self._mul_backward(node, out_scale)
        elif op == "Sigmoid":
            x = node.inputs[0]
            amax = out_scale * 127.0
            if self.can_receive(x) and node.outputs[0] not in self.fixed and (
                0.5 < amax < _SIGMOID_SATURATED
            ):
                assert x is not None
                self.give(x, math.log(amax / (1.0 - amax)) / 127.0, "Sigmoid: logit of output amax")
        elif op == "HardSigmoid":
            x = node.inputs[0]
            if self.can_receive(x):
                assert x is not None
                # Copying [0, 1] back would clip x to +-1; x beyond the saturation points maps to
                # 0 or 1 whatever its value, so clipping there changes nothing.
                alpha, beta = _hard_sigmoid_params(node)
                if alpha > 0:
                    self.give(x, max(beta, 1.0 - beta) / alpha / 127.0,
                              "HardSigmoid: its saturation points")
        elif op not in FORWARD_ONLY_OPS and self.can_receive(node.inputs[0]):
            x = node.inputs[0]
            assert x is not None
            self.give(x, out_scale, f"{op}: copied from output")

    def _concat_sole_inputs(self, node: ir.Node) -> None:
        """Without ``--infer_concat_scales``: a Concat input that only this Concat reads takes
        the output's scale. Its values are a slice of the output, which the output's Q
        quantizes anyway, so quantizing it first changes no value; left unscaled, it would run
        FP16 and be rounded before that Q (values on a rounding point flip)."""
        out_scale = self.scales.get(node.outputs[0])
        if out_scale is None:
            return
        for value in node.inputs:
            if value is not None and self.can_receive(value) and all(
                    use.node is node for use in value.uses()):
                self.give(value, out_scale, "Concat: output scale (its only reader)")

    def _mul_backward(self, node: ir.Node, out_scale: float) -> None:
        if len(node.inputs) != 2:
            return
        a, b = node.inputs
        for missing, known in ((a, b), (b, a)):
            known_scale = self.scales.get(known)
            if known_scale is not None and self.can_receive(missing):
                assert missing is not None
                # amax_out = amax_a * amax_b  =>  s_missing = s_out / (s_known * 127)
                self.give(missing, out_scale / (known_scale * 127.0), "Mul: product rule")
                return


def _hard_sigmoid_params(node: ir.Node) -> tuple[float, float]:
    """HardSigmoid's alpha and beta (the ONNX defaults 0.2 and 0.5 when not given)."""
    alpha, beta = node.attributes.get("alpha"), node.attributes.get("beta")
    return (0.2 if alpha is None else alpha.as_float(),
            0.5 if beta is None else beta.as_float())


def propagate_scales(
    nodes: Iterable[ir.Node], scales: ScaleTable, options: PropagationOptions
) -> int:
    """Propagate in place; return the number of scales added."""
    order = list(nodes)
    prop = _Propagator(scales, options.op_set())
    for _ in range(_MAX_SWEEPS):
        before = prop.changed
        for node in order:
            prop.forward(node)
        for node in reversed(order):
            prop.backward(node)
        if prop.changed == before:
            break
    return prop.changed
