"""What the precision walk knows so far: which values exist in the engine as INT8 or float.

``WalkState`` holds the two maps the walk fills (value -> ``Int8Tensor``, value -> float
``EngineTensor``), the layers appended so far and the indexes the prediction's queries read. Its
methods are the steps every layer decision shares: read a value as INT8 or float (adding the
Dequantize Reformat a float reader forces, E2), open a layer and finish it. The decisions
themselves are in ``weighted`` (weighted ops, Concat) and ``walk`` (Q nodes and the rest).
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx_ir as ir

from qdqkit.core.macs import macs_of
from qdqkit.core.qdq import FLOAT_TYPES, is_dequantize, node_label
from qdqkit.trt.engine import EngineLayer, EngineTensor, LayerKind, Precision
from qdqkit.trt.predict.fusion import Block, GraphFacts
from qdqkit.trt.predict.ops import ELIDED_COPY_OPS
from qdqkit.trt.predict.wanted import usable_scale

_DTYPE_PRECISION = {
    ir.DataType.FLOAT: Precision.FP32,
    ir.DataType.FLOAT16: Precision.FP16,
    ir.DataType.BFLOAT16: Precision.BF16,
    ir.DataType.INT8: Precision.INT8,
    ir.DataType.UINT8: Precision.UINT8,
    ir.DataType.INT32: Precision.INT32,
    ir.DataType.INT64: Precision.INT64,
    ir.DataType.BOOL: Precision.BOOL,
}


@dataclass(frozen=True)
class Int8Tensor:
    """An ONNX value as it exists in the engine in INT8: the engine tensor and its scale."""

    engine_name: str
    scale: float | None  # per-tensor; None when no usable scale is known


def value_name(value: ir.Value) -> str:
    return value.name or "?"


class WalkState:
    """The maps and layers of one precision walk, and the steps its decisions share."""

    def __init__(
        self,
        facts: GraphFacts,
        block_of: dict[ir.Node, Block],
        wanted: dict[ir.Value, float | None],
        strongly_typed: bool,
    ) -> None:
        self.facts = facts
        self.block_of = block_of
        self.wanted = wanted
        self.strongly_typed = strongly_typed
        self.layers: list[EngineLayer] = []
        self.int8: dict[ir.Value, Int8Tensor] = {}
        self.floats: dict[ir.Value, EngineTensor] = {}
        self.alias: dict[ir.Value, ir.Value] = {}
        self.producer_layer: dict[ir.Value, EngineLayer] = {}
        self.layer_of_block: dict[Block, EngineLayer] = {}
        self.qdq_layer: dict[ir.Node, EngineLayer] = {}  # Q/DQ node -> its standalone Reformat
        self.requantize_for: dict[ir.Node, list[EngineLayer]] = {}  # Concat -> its input requantizes
        self.absorbed_into: dict[ir.Node, EngineLayer] = {}  # activation Q/DQ fused into a layer
        self.absorbed_pools: set[ir.Node] = set()
        # Q nodes of one tensor with one scale: TensorRT merges them into one layer (B7)
        self.q_merge: dict[tuple[ir.Value, float | None], EngineLayer] = {}
        self.elided: list[str] = []
        self.network_outputs = self._network_outputs(facts.graph)

    @staticmethod
    def _network_outputs(graph: ir.Graph) -> set[ir.Value]:
        """Graph outputs, and the values that reach one through elided copies only."""
        found: set[ir.Value] = set()
        for value in graph.outputs:
            current: ir.Value | None = value
            while current is not None and current not in found:
                found.add(current)
                producer = current.producer()
                copy = producer is not None and producer.op_type in ELIDED_COPY_OPS
                current = producer.inputs[0] if copy and producer and producer.inputs else None
        return found

    # ------------------------------------------------------------------ values
    def shape(self, value: ir.Value) -> tuple[int, ...] | None:
        shape = self.facts.shape_of(value)
        if shape is None:
            return None
        return tuple(d if isinstance(d, int) else -1 for d in shape)

    def float_precision(self, value: ir.Value) -> Precision:
        dtype = self.facts.dtype_of(value)
        if dtype is not None and dtype not in FLOAT_TYPES:
            return _DTYPE_PRECISION.get(dtype, Precision.UNKNOWN)
        if value in self.network_outputs and dtype is not None:
            # Network I/O keeps the ONNX type unless --outputIOFormats says otherwise (E7).
            return _DTYPE_PRECISION.get(dtype, Precision.FP32)
        if not self.strongly_typed:
            return Precision.FP16  # built like --best: unquantized layers may pick FP16 kernels
        return _DTYPE_PRECISION.get(dtype, Precision.FP32) if dtype is not None else Precision.FP32

    def resolve(self, value: ir.Value) -> ir.Value:
        while value in self.alias:
            value = self.alias[value]
        return value

    def int8_of(self, value: ir.Value | None) -> Int8Tensor | None:
        if value is None:
            return None
        value = self.resolve(value)
        if value in self.int8:
            return self.int8[value]
        producer = value.producer()
        if producer is None or not is_dequantize(producer) or producer in self.facts.folded_nodes:
            return None
        scale = usable_scale(self.facts.view.params(producer))
        source = producer.inputs[0]
        if scale is None or source is None:
            return None
        known = self.int8.get(self.resolve(source))
        return Int8Tensor(known.engine_name if known else value_name(source), scale)

    def float_of(self, value: ir.Value) -> EngineTensor:
        value = self.resolve(value)
        if value in self.floats:
            return self.floats[value]
        producer = value.producer()
        if producer is not None and is_dequantize(producer) and producer not in self.facts.folded_nodes:
            return self._dequantize_reformat(producer)
        if value in self.int8:
            source = self.int8[value]
            layer = self.reformat(
                f"Dequantize {value.name}", [], EngineTensor(source.engine_name, Precision.INT8),
                EngineTensor(f"{value.name} (float)", self.float_precision(value),
                             shape=self.shape(value)),
                "an INT8 tensor carried through a commuting op has a float reader (E2, E5)",
            )
            self.floats[value] = layer.outputs[0]
            return layer.outputs[0]
        tensor = EngineTensor(value_name(value), self.float_precision(value), shape=self.shape(value))
        if value.is_graph_input() and value.dtype in FLOAT_TYPES:
            tensor.precision = _DTYPE_PRECISION.get(value.dtype, Precision.FP32)
        self.floats[value] = tensor
        return tensor

    def external_inputs(self, block: Block) -> list[ir.Value]:
        """The computed values ``block`` reads from outside itself, in first-read order."""
        inside = {out for n in block.nodes for out in n.outputs}
        seen: list[ir.Value] = []
        for n in block.nodes:
            for v in n.inputs:
                if v is not None and v not in inside and not self.facts.is_constant(v) and v not in seen:
                    seen.append(v)
        return seen

    # ------------------------------------------------------------------ layers
    def reformat(
        self, name: str, nodes: list[str], source: EngineTensor, target: EngineTensor, why: str
    ) -> EngineLayer:
        layer = EngineLayer(
            name=name, kind=LayerKind.REFORMAT, onnx_nodes=nodes, inputs=[source],
            outputs=[target], origin="QDQ", notes=[why],
        )
        self.layers.append(layer)
        return layer

    def _dequantize_reformat(self, dq: ir.Node) -> EngineTensor:
        if dq in self.qdq_layer:
            return self.qdq_layer[dq].outputs[0]
        source = dq.inputs[0]
        known = self.int8.get(self.resolve(source)) if source is not None else None
        name = known.engine_name if known else (source.name if source is not None else "?")
        out = dq.outputs[0]
        readers = sorted({node_label(u.node) for u in out.uses()}) or ["the network output"]
        layer = self.reformat(
            node_label(dq), [node_label(dq)], EngineTensor(name or "?", Precision.INT8),
            EngineTensor(out.name or "?", self.float_precision(out), shape=self.shape(out)),
            f"standalone dequantize: {', '.join(readers[:3])} cannot take INT8 here (E2)",
        )
        self.qdq_layer[dq] = layer
        self.floats[out] = layer.outputs[0]
        return layer.outputs[0]

    def new_layer(self, block: Block, kind: LayerKind, names: list[str]) -> EngineLayer:
        layer = EngineLayer(name=" + ".join(names), kind=kind, onnx_nodes=list(names))
        self.layer_of_block[block] = layer
        return layer

    def finish(self, block: Block, layer: EngineLayer, scale: float | None, int8: bool) -> None:
        outputs = [out for out in block.last.outputs if out is not None]
        for out in outputs:
            if int8:
                self.int8[out] = Int8Tensor(value_name(out), scale)
                layer.outputs.append(
                    EngineTensor(value_name(out), Precision.INT8, shape=self.shape(out)))
            else:
                tensor = EngineTensor(
                    value_name(out), self.float_precision(out), shape=self.shape(out))
                self.floats[out] = tensor
                layer.outputs.append(tensor)
            self.producer_layer[out] = layer
        self.layers.append(layer)

    def take_int8(self, layer: EngineLayer, value: ir.Value, source: Int8Tensor) -> None:
        layer.inputs.append(EngineTensor(source.engine_name, Precision.INT8, shape=self.shape(value)))
        producer = self.resolve(value).producer()
        if producer is not None and is_dequantize(producer):
            layer.onnx_nodes.append(node_label(producer))
            self.absorbed_into.setdefault(producer, layer)

    def macs(self, node: ir.Node, weight: ir.Value | None) -> int | None:
        stored = self.facts.shape_of(weight) if weight is not None else None
        shape = None
        if stored is not None:
            shape = tuple(d if isinstance(d, int) else 1 for d in stored)
        return macs_of(node, shape, shape_of=self.facts.shape_of)
