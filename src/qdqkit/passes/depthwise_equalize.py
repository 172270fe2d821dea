"""DepthwiseEqualize: rescale the channels a weighted op reads and undo it in its weight, exactly.

Rules:
1. For a tensor X read only by depthwise convolutions (``group`` = input channels, constant
   weight of shape (C * m, 1, ...)), a ``Mul(X, f)`` with one factor per channel (shape
   (1, C, 1, ...)) is inserted in front of them, and each reader's output channel o, which reads
   input channel o // m, has its weight divided by ``f[o // m]``. The factors are powers of two,
   so both the product and the division are exact: the float model computes the same values.
   The same for X read on input A by MatMuls or untransposed Gemms with a constant 2-D weight
   (SmoothQuant where no exact fold exists, ``quantization.smooth``): X's channels are its last
   axis (factors of shape (C,)) and row j of each weight is divided by ``f[j]``.
2. ``keep`` (optional) sees the inserted Muls once they are in the graph and returns the ones to
   keep (``quantization.equalize`` keeps those TensorRT fuses into X's producer); the others are
   removed again and their readers' weights are left as they were.
3. A weight shared with another node gets a copy of its own; the original stays as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import onnx_ir as ir

from qdqkit.core.constants import constant_array, replace_constant_input
from qdqkit.core.names import taken_names, unique_name


@dataclass(frozen=True)
class Equalization:
    """Multiply ``value``'s channels by ``factors`` for ``readers``; divide their weights."""

    value: ir.Value
    readers: tuple[ir.Node, ...]
    factors: np.ndarray  # one power of two per channel of ``value`` (axis 1)
    name: str | None = None  # the Mul's output name (default: ``<value>_equalize``)


class DepthwiseEqualize(ir.passes.InPlacePass):
    """Apply each ``Equalization`` (see the module docstring for the rules); ``applied`` then
    lists the ones kept, each with the Mul node that carries its factors."""

    def __init__(self, equalizations: Sequence[Equalization],
                 keep: Callable[[ir.Model, list[ir.Node]], set[ir.Node]] | None = None) -> None:
        super().__init__()
        self.equalizations = list(equalizations)
        self.keep = keep
        self.applied: list[tuple[Equalization, ir.Node]] = []

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        taken = taken_names(graph)
        inserted = [(eq, _insert_mul(graph, eq, taken)) for eq in self.equalizations]
        kept = (self.keep(model, [mul for _, mul in inserted]) if self.keep is not None
                else {mul for _, mul in inserted})
        for eq, mul in inserted:
            if mul not in kept:
                for reader in eq.readers:
                    reader.replace_input_with(0, eq.value)
                graph.remove(mul, safe=True)
                continue
            for reader in eq.readers:
                _divide_weight(graph, reader, eq.factors)
            self.applied.append((eq, mul))
        return ir.passes.PassResult(model, modified=bool(self.applied))


def _insert_mul(graph: ir.Graph, eq: Equalization, taken: set[str]) -> ir.Node:
    """``Mul(value, factors)`` right after ``value``'s producer, read by ``eq.readers``."""
    value = eq.value
    base = value.name or "tensor"
    weight = constant_array(eq.readers[0].inputs[1])
    assert weight is not None
    # A Conv's input has its weight's rank and type, whether or not they were inferred; a
    # MatMul's channels are its input's last axis.
    shape = ((eq.factors.size,) if eq.readers[0].op_type in _LAST_AXIS_READERS
             else (1, eq.factors.size) + (1,) * max(weight.ndim - 2, 0))
    array = eq.factors.reshape(shape).astype(weight.dtype)
    dtype = ir.DataType.from_numpy(array.dtype)
    factor_name = unique_name(taken, f"{base}_channel_factors")
    factors = ir.Value(name=factor_name, shape=ir.Shape(array.shape), type=ir.TensorType(dtype),
                       const_value=ir.Tensor(array, name=factor_name))
    graph.register_initializer(factors)
    name = eq.name if eq.name and eq.name not in taken else unique_name(taken, f"{base}_equalize")
    taken.add(name)
    mul = ir.Node("", "Mul", [value, factors], name=name)
    out = mul.outputs[0]
    out.name = name
    if value.type is not None:
        out.type = value.type
    if value.shape is not None:
        out.shape = value.shape
    producer = value.producer()
    if producer is not None and producer.graph is graph:
        graph.insert_after(producer, mul)
    else:  # a graph input: in front of the first reader
        readers = set(eq.readers)
        graph.insert_before(next(n for n in graph if n in readers), mul)
    for reader in eq.readers:
        reader.replace_input_with(0, out)
    return mul


_LAST_AXIS_READERS = frozenset({"MatMul", "Gemm"})


def _divide_weight(graph: ir.Graph, reader: ir.Node, factors: np.ndarray) -> None:
    array = constant_array(reader.inputs[1])  # an initializer or a Constant node's value
    assert array is not None
    if reader.op_type in _LAST_AXIS_READERS:  # row j of a (K, N) weight meets channel j
        divided = array / factors.reshape(-1, 1).astype(array.dtype)
        replace_constant_input(graph, reader, 1, divided.astype(array.dtype), "equalized")
        return
    per_output = np.repeat(factors, array.shape[0] // factors.size)
    divided = array / per_output.reshape((-1,) + (1,) * (array.ndim - 1)).astype(array.dtype)
    replace_constant_input(graph, reader, 1, divided.astype(array.dtype), "equalized")
