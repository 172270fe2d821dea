"""Value types after a round of repairs, without running ONNX shape inference again.

A repair only removes and inserts QuantizeLinear/DequantizeLinear (and an Identity keeping a
network output's name); every other tensor keeps its name and its type. So the types inferred
before the round still hold, and a new Q, DQ or Identity output takes its input's shape, with
the element type the ONNX spec gives it: a Q's is its zero point's (its ``output_dtype``, else
uint8), a DQ's is its scale's, an Identity's is its input's. Any other new output: the caller
infers again (``None``).
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx_ir as ir

from qdqkit.core.shapes import ValueTypes

_PASS_THROUGH = frozenset({"QuantizeLinear", "DequantizeLinear", "Identity"})


Known = tuple["ir.Shape | None", "ir.DataType | None"]


@dataclass(frozen=True)
class RoundTypes:
    """The value types a prediction of a model used, by value: a repair may rename a tensor (a
    network output keeps its name), which a table by name would lose."""

    types: ValueTypes
    known: dict[ir.Value, Known]

    @classmethod
    def of(cls, model: ir.Model, types: ValueTypes) -> RoundTypes:
        return cls(types, {v: (types.shape_of(v), types.dtype_of(v))
                           for node in model.graph for v in node.outputs})

    def after_round(self, model: ir.Model) -> ValueTypes | None:
        """The types of ``model`` now (see the module docstring); None when some new output is
        not a Q, DQ or Identity and needs inference."""
        shapes: dict[str, ir.Shape] = {}
        dtypes: dict[str, ir.DataType] = {}
        carried = ValueTypes(shapes, dtypes, inferred_wins=self.types.inferred_wins)
        for node in model.graph:  # topological order: a new node's input is typed before it
            for value in node.outputs:
                name = value.name
                if not name:
                    continue
                known = self.known.get(value)
                if known is None:
                    known = _derived(node, carried)
                    if known is None:
                        return None
                shape, dtype = known
                if shape is not None:
                    shapes[name] = shape
                if dtype is not None:
                    dtypes[name] = dtype
        return carried


def _derived(node: ir.Node, types: ValueTypes) -> Known | None:
    """A new output's type: a Q's, DQ's or Identity's from its input; None for any other op."""
    source = node.inputs[0] if node.inputs else None
    if node.domain not in ("", "ai.onnx") or node.op_type not in _PASS_THROUGH or source is None:
        return None
    shape = types.shape_of(source)
    if shape is None and source.const_value is not None:
        shape = ir.Shape([d if isinstance(d, int) else None for d in source.const_value.shape])
    return shape, _dtype(node, source, types)


def _dtype(node: ir.Node, source: ir.Value, types: ValueTypes) -> ir.DataType | None:
    if node.op_type == "Identity":
        return _type_of(source, types)
    if node.op_type == "DequantizeLinear":
        scale = node.inputs[1] if len(node.inputs) > 1 else None
        return _type_of(scale, types) if scale is not None else None
    zero_point = node.inputs[2] if len(node.inputs) > 2 else None
    if zero_point is not None:
        return _type_of(zero_point, types)
    attr = node.attributes.get("output_dtype")
    if attr is not None and attr.as_int():
        return ir.DataType(attr.as_int())
    return ir.DataType.UINT8


def _type_of(value: ir.Value, types: ValueTypes) -> ir.DataType | None:
    """A value's element type; a constant's from its tensor when the value declares none."""
    found = types.dtype_of(value)
    if found is None and value.const_value is not None:
        return value.const_value.dtype
    return found
