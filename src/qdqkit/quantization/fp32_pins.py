"""FP32 pins: what a weakly typed ``--int8 --fp16`` build (TensorRT 8.6 and 10) must keep FP32.

With ``--fp16`` TensorRT may run any layer that is not INT8 in FP16, including the ones the FP16
remainder of a TensorRT 11 output keeps FP32 because FP16 cannot hold them (TensorRT itself warns
that a LayerNorm run in FP16 may overflow). The model stays float32 for these versions, so the
pins go on the build line instead. Rules:

1. A node is pinned when ``passes.float16_remainder`` rule 1 would keep it FP32 for its numbers:
   a normalization or sum of squares, a constant beyond 65504, or a calibrated input or output
   beyond 65504 (``ranges``, the same FP16 watch the TensorRT 11 remainder uses).
2. Only nodes of layers the predicted engine runs in float are pinned: a node inside an INT8
   layer (a conv and its fused epilogue, an op between Q/DQ) is TensorRT's to fuse, and an FP32
   constraint on it would fight the Q/DQ. Q/DQ, plugin (custom-domain) nodes and nodes holding
   subgraphs are never pinned: TensorRT picks their precision itself.
3. Each pin is ``NAME:fp32`` in ``--layerPrecisions`` and, for a node with one float output, in
   ``--layerOutputTypes``, so the value it writes is FP32 too, under ``--precisionConstraints=obey``
   (FP32 always has a kernel). Unnamed nodes are named first (``passes.name_nodes``): a pin must
   name a layer TensorRT reports.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

import onnx_ir as ir

from qdqkit.core.qdq import FLOAT_TYPES, is_qdq
from qdqkit.core.shapes import ValueTypes
from qdqkit.passes.float16_remainder import fp32_reason
from qdqkit.passes.name_nodes import NameUnnamedNodes
from qdqkit.trt.engine import Precision
from qdqkit.trt.layer_args import format_layer_precisions


def _candidate(node: ir.Node, ranges: Mapping[str, tuple[float, float]]) -> str | None:
    if is_qdq(node) or node.domain not in ("", "ai.onnx") or any(
            attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)
            for attr in node.attributes.values()):
        return None
    return fp32_reason(node, ranges)


@dataclass(frozen=True)
class Fp32Pins:
    """The nodes pinned FP32 with their reasons; those of them with one float output."""

    reasons: dict[str, str] = field(default_factory=dict)
    float_output: tuple[str, ...] = ()

    def flags(self) -> list[str]:
        """Rule 3: the trtexec flags (none without pins), each quoted for a shell."""
        if not self.reasons:
            return []
        flags = ["--precisionConstraints=obey",
                 f"--layerPrecisions={format_layer_precisions(self.reasons, 'fp32')}"]
        if self.float_output:
            flags.append(
                f"--layerOutputTypes={format_layer_precisions(self.float_output, 'fp32')}")
        return [shlex.quote(flag) for flag in flags]


def fp32_pins(model: ir.Model, ranges: Mapping[str, tuple[float, float]], trt: str,
              types: ValueTypes) -> Fp32Pins:
    """Rules 1-3 for ``model`` (unnamed nodes get names); ``types`` knows the float model's
    value types by name, for the outputs ``model`` leaves untyped."""
    candidates = {node: why for node in model.graph if (why := _candidate(node, ranges))}
    if not candidates:
        return Fp32Pins()  # the usual CNN: no prediction needed
    NameUnnamedNodes()(model)
    from qdqkit.trt.predict import run_prediction

    prediction = run_prediction(model, trt=trt)
    reasons: dict[str, str] = {}
    float_output: list[str] = []
    for node, why in candidates.items():
        layer = prediction.layer_of(node)
        if layer is None:
            continue  # elided: no layer of its own to constrain
        if any(t.precision == Precision.INT8 for t in (*layer.inputs, *layer.outputs)):
            continue
        name = node.name or ""
        reasons[name] = why
        if len(node.outputs) == 1 and types.dtype_of(node.outputs[0]) in FLOAT_TYPES:
            float_output.append(name)
    return Fp32Pins(reasons, tuple(float_output))


__all__ = ["Fp32Pins", "fp32_pins"]
