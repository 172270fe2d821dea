"""SmoothRescale: move activation outliers into the weights, exactly (SmoothQuant).

Rules:
1. For a normalization (LayerNormalization, the ``x * gamma + beta`` end of a decomposed one, or
   a Linear: MatMul with a constant weight plus an optional constant bias Add) whose output X is
   read only by MatMul/Gemm with constant weights (on input B, not transposed), channel j of X is
   divided by ``s_j`` and row j of every reader's weight multiplied by ``s_j``: gamma and beta
   (or the Linear's weight columns and bias) are divided by ``s``. ``(X / s)(s W) = X W``: the
   float model computes the same.
2. A factor is applied only where it is finite and positive; others become 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnx_ir as ir

from qdqkit.core.constants import replace_constant_input


@dataclass(frozen=True)
class Smoothing:
    """Divide ``source``'s output channels by ``factors``; multiply ``readers``' weight rows."""

    source: ir.Node  # LayerNormalization, or the last node of a Linear (MatMul or its bias Add)
    readers: tuple[ir.Node, ...]
    factors: np.ndarray


class SmoothRescale(ir.passes.InPlacePass):
    """Apply each ``Smoothing`` (see the module docstring for the rules)."""

    def __init__(self, smoothings: Sequence[Smoothing]) -> None:
        super().__init__()
        self.smoothings = list(smoothings)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        for smoothing in self.smoothings:
            factors = np.where(np.isfinite(smoothing.factors) & (smoothing.factors > 0),
                               smoothing.factors, 1.0).astype(np.float32)
            for node, index in source_constants(smoothing.source):
                value = node.inputs[index]
                assert value is not None and value.const_value is not None
                array = value.const_value.numpy()
                replace_constant_input(graph, node, index, (array / factors).astype(array.dtype),
                                       "smoothed")
            for reader in smoothing.readers:
                weight = reader.inputs[1]
                assert weight is not None and weight.const_value is not None
                array = weight.const_value.numpy() * factors.reshape(-1, 1)
                replace_constant_input(graph, reader, 1, array.astype(np.float32), "smoothed")
        return ir.passes.PassResult(model, modified=bool(self.smoothings))


def source_constants(source: ir.Node) -> list[tuple[ir.Node, int]]:
    """(node, input index) of the constants whose last axis is the source's output channel."""
    if source.op_type == "LayerNormalization":
        return [(source, i) for i in (1, 2) if i < len(source.inputs) and source.inputs[i]]
    found: list[tuple[ir.Node, int]] = []
    node = source
    if node.op_type == "Add":
        found += [(node, i) for i, v in enumerate(node.inputs)
                  if v is not None and v.const_value is not None]
        producer = next(v.producer() for v in node.inputs
                        if v is not None and v.const_value is None)
        assert producer is not None
        node = producer
    constants = [i for i, v in enumerate(node.inputs) if v is not None and v.const_value is not None]
    if node.op_type == "Mul":  # x * gamma: gamma is per channel
        found += [(node, i) for i in constants]
    else:  # a MatMul: its weight's columns are the output channels
        found.append((node, 1))
    return found
