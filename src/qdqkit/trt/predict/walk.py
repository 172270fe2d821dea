"""The precision walk: decide each layer's input/output precision and the Reformats that appear.

One pass over the graph in topological order, with two maps: which ONNX values exist in the engine
as INT8 (with their scale) and which as float. The rules it applies:

1. A weighted op runs INT8 when its activation arrives through DQ and its weight through Q/DQ (C1,
   D1); it writes INT8 when every reader wants one INT8 scale (wanted.py) and, for a residual
   epilogue, the residual input is INT8 too (C3). An INT8 residual into a float output is
   dequantized by a standalone Reformat (C4).
2. Ops Q/DQ commute with (MaxPool, copies, Concat with equal scales) carry INT8 through; a Q behind
   them cancels when its scale matches, else it requantizes (B6, E3). MaxPool after an INT8-writing
   conv joins it (ConvActPool, C10).
3. Non-weighted quantizable layers (averaging pools, pointwise blocks) run INT8 only with every input
   through DQ *and* the output wanted in INT8 (C8, C9, D5); otherwise they run float.
4. Whatever cannot fuse becomes a Reformat named after its Q or DQ (E1, E2): a Q whose producer
   writes float, a DQ whose reader wants float (network outputs included, E7). Several Qs with one
   scale on one tensor share a Reformat (B7).
"""

from __future__ import annotations

import onnx_ir as ir

from qdqkit.core.macs import macs_of
from qdqkit.core.qdq import FLOAT_TYPES, is_dequantize, is_quantize, node_label
from qdqkit.trt.engine import EngineLayer, EngineTensor, LayerKind, Precision
from qdqkit.trt.predict.fusion import Block, GraphFacts
from qdqkit.trt.predict.ops import (
    AVERAGING_POOLS,
    ELIDED_COPY_OPS,
    POINTWISE,
    is_default_domain,
    is_plugin,
    layer_kind_of,
)
from qdqkit.trt.predict.wanted import is_commuting, usable_scale

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

Int8Tensor = tuple[str, "float | None"]  # engine tensor name, per-tensor scale


def _vname(value: ir.Value) -> str:
    return value.name or "?"


def _shape(value: ir.Value) -> tuple[int, ...] | None:
    if value.shape is None:
        return None
    return tuple(d if isinstance(d, int) else -1 for d in value.shape)


def _name(node: ir.Node) -> str:
    return node.name or node_label(node)


class PrecisionWalk:
    """Walks the graph once and appends engine layers in execution order."""

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
        self.q_merge: dict[tuple[ir.Value, float | None], EngineLayer] = {}
        self.absorbed_pools: set[ir.Node] = set()
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

    # ------------------------------------------------------------------ precisions
    def float_precision(self, value: ir.Value) -> Precision:
        dtype = value.dtype
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
        return (known[0] if known else _vname(source), scale)

    def float_of(self, value: ir.Value) -> EngineTensor:
        value = self.resolve(value)
        if value in self.floats:
            return self.floats[value]
        producer = value.producer()
        if producer is not None and is_dequantize(producer) and producer not in self.facts.folded_nodes:
            return self._dequantize_reformat(producer)
        if value in self.int8:
            source = self.int8[value]
            layer = self._reformat(
                f"Dequantize {value.name}", [], EngineTensor(source[0], Precision.INT8),
                EngineTensor(f"{value.name} (float)", self.float_precision(value),
                             shape=_shape(value)),
                "an INT8 tensor carried through a commuting op has a float reader (E2, E5)",
            )
            self.floats[value] = layer.outputs[0]
            return layer.outputs[0]
        tensor = EngineTensor(_vname(value), self.float_precision(value), shape=_shape(value))
        if value.is_graph_input() and value.dtype in FLOAT_TYPES:
            tensor.precision = _DTYPE_PRECISION.get(value.dtype, Precision.FP32)
        self.floats[value] = tensor
        return tensor

    # ------------------------------------------------------------------ reformats
    def _reformat(
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
        name = known[0] if known else (source.name if source is not None else "?")
        out = dq.outputs[0]
        readers = sorted({_name(u.node) for u in out.uses()}) or ["the network output"]
        layer = self._reformat(
            _name(dq), [_name(dq)], EngineTensor(name or "?", Precision.INT8),
            EngineTensor(out.name or "?", self.float_precision(out), shape=_shape(out)),
            f"standalone dequantize: {', '.join(readers[:3])} cannot take INT8 here (E2)",
        )
        self.qdq_layer[dq] = layer
        self.floats[out] = layer.outputs[0]
        return layer.outputs[0]

    def handle_quantize(self, q: ir.Node) -> None:
        x = q.inputs[0]
        out = q.outputs[0]
        if x is None:
            return
        x = self.resolve(x)
        scale = usable_scale(self.facts.view.params(q))
        source = self.int8_of(x)  # INT8 already: a commuting op's output, or DQ -> Q (B6)
        if source is not None:
            if scale is not None and source[1] == scale:
                self._cancel(q, x, source)
                return
            names = [_name(q)]
            dq = x.producer()
            if dq is not None and is_dequantize(dq) and dq not in self.qdq_layer:
                names.append(_name(dq))  # the DQ -> Q pair becomes this one requantize
            layer = self._reformat(
                _name(q), names, EngineTensor(source[0], Precision.INT8),
                EngineTensor(_vname(out), Precision.INT8, shape=_shape(out)),
                f"requantize: the INT8 input has scale {source[1]!r}, the Q wants {scale!r} (B6, E3)",
            )
            self.qdq_layer[q] = layer
            self.int8[out] = (_vname(out), scale)
            return
        if scale is not None and (x, scale) in self.q_merge:
            layer = self.q_merge[(x, scale)]
            layer.onnx_nodes.append(_name(q))
            layer.notes.append(f"{_name(q)} has the same scale on the same tensor: merged (B7)")
            self.qdq_layer[q] = layer
            self.int8[out] = (layer.outputs[0].name, scale)
            return
        if x.is_graph_input():
            why = "quantize of a network input: nothing earlier to fuse it into (B8, E7)"
        else:
            producer = self.producer_layer.get(x)
            who = f"'{producer.name}'" if producer is not None else f"the producer of '{x.name}'"
            why = f"standalone quantize: {who} writes float, so the Q cannot fuse (E1)"
        layer = self._reformat(
            _name(q), [_name(q)], self.float_of(x),
            EngineTensor(_vname(out), Precision.INT8, shape=_shape(out)), why,
        )
        self.qdq_layer[q] = layer
        self.int8[out] = (_vname(out), scale)
        self.q_merge[(x, scale)] = layer

    def _cancel(self, q: ir.Node, x: ir.Value, source: Int8Tensor) -> None:
        """A Q on a tensor that is INT8 at the same scale already: it costs nothing (B6)."""
        self.int8[q.outputs[0]] = source
        names = [_name(q)]
        owner = self.producer_layer.get(x)
        dq = x.producer()
        if dq is not None and is_dequantize(dq) and dq not in self.qdq_layer:
            names.append(_name(dq))  # DQ -> Q with one scale: the pair vanishes
            if owner is None and dq.inputs[0] is not None:
                owner = self.producer_layer.get(self.resolve(dq.inputs[0]))
        if owner is None:
            self.elided += names
            return
        owner.onnx_nodes += [n for n in names if n not in owner.onnx_nodes]
        self.absorbed_into[q] = owner
        self.producer_layer[q.outputs[0]] = owner

    # ------------------------------------------------------------------ the walk
    def run(self, graph: ir.Graph) -> None:
        for value in graph.inputs:
            self.float_of(value)
        for node in graph:
            if node in self.facts.folded_nodes or node in self.absorbed_pools:
                continue
            if is_quantize(node):
                self.handle_quantize(node)
                continue
            if is_dequantize(node):
                continue
            block = self.block_of.get(node)
            if block is None:
                copy = node.op_type in ELIDED_COPY_OPS and is_default_domain(node)
                if copy and node.inputs and node.inputs[0] is not None:
                    self.alias[node.outputs[0]] = node.inputs[0]
                    self.elided.append(_name(node))
                continue
            if node is block.last:
                self.process_block(block)
        for value in graph.outputs:
            resolved = self.resolve(value)
            producer = resolved.producer()
            if producer is not None and is_quantize(producer):
                continue  # an INT8 network output
            self.float_of(resolved)

    def process_block(self, block: Block) -> None:
        if block.weighted is not None:
            self._weighted(block)
            return
        node = block.anchor
        if is_plugin(node):
            self._float_layer(block, "custom-domain op: an opaque float plugin layer (C19)")
        elif node.op_type == "Concat" and is_default_domain(node):
            self._concat(node)
        elif is_commuting(node):
            self._commuting(block)
        elif node.op_type in AVERAGING_POOLS or node.op_type in POINTWISE or node.op_type == "MatMul":
            self._quantizable(block)
        else:
            self._float_layer(block, "")

    def _external_inputs(self, block: Block) -> list[ir.Value]:
        inside = {out for n in block.nodes for out in n.outputs}
        seen: list[ir.Value] = []
        for n in block.nodes:
            for v in n.inputs:
                if v is not None and v not in inside and not self.facts.is_constant(v) and v not in seen:
                    seen.append(v)
        return seen

    def _new_layer(self, block: Block, kind: LayerKind, names: list[str]) -> EngineLayer:
        layer = EngineLayer(name=" + ".join(names), kind=kind, onnx_nodes=list(names))
        self.layer_of_block[block] = layer
        return layer

    def _finish(self, block: Block, layer: EngineLayer, scale: float | None, int8: bool) -> None:
        outputs = [out for out in block.last.outputs if out is not None]
        for out in outputs:
            if int8:
                self.int8[out] = (_vname(out), scale)
                layer.outputs.append(EngineTensor(_vname(out), Precision.INT8, shape=_shape(out)))
            else:
                tensor = EngineTensor(_vname(out), self.float_precision(out), shape=_shape(out))
                self.floats[out] = tensor
                layer.outputs.append(tensor)
            self.producer_layer[out] = layer
        self.layers.append(layer)

    def _take_int8(self, layer: EngineLayer, value: ir.Value, source: Int8Tensor) -> None:
        layer.inputs.append(EngineTensor(source[0], Precision.INT8, shape=_shape(value)))
        producer = self.resolve(value).producer()
        if producer is not None and is_dequantize(producer):
            layer.onnx_nodes.append(_name(producer))
            self.absorbed_into.setdefault(producer, layer)

    def _weighted(self, block: Block) -> None:
        from qdqkit.trt.predict.weighted import weighted_layer

        weighted_layer(self, block)

    def _float_layer(self, block: Block, why: str) -> None:
        layer = self._new_layer(block, layer_kind_of(block.anchor), [_name(n) for n in block.nodes])
        for value in self._external_inputs(block):
            layer.inputs.append(self.float_of(value))
        if why:
            layer.notes.append(why)
        self._finish(block, layer, None, False)

    def _commuting(self, block: Block) -> None:
        node = block.anchor
        data = node.inputs[0] if node.inputs else None
        source = self.int8_of(data)
        if data is None or source is None:
            self._float_layer(block, "")
            return
        layer = self._new_layer(block, layer_kind_of(node), [_name(node)])
        self._take_int8(layer, data, source)
        layer.notes.append("Q/DQ commute with this op: it runs INT8 on the dequantized input (B2, B3)")
        self._finish(block, layer, source[1], True)

    def _quantizable(self, block: Block) -> None:
        inputs = self._external_inputs(block)
        sources = [self.int8_of(v) for v in inputs]
        want = self.wanted.get(block.output)
        is_matmul = block.anchor.op_type == "MatMul"
        all_int8 = bool(inputs) and all(s is not None for s in sources)
        if not all_int8 or (want is None and not is_matmul):
            why = ""
            if any(s is not None for s in sources):
                why = "INT8 inputs but no INT8 output (or a float input): runs float (C8, D5)"
            self._float_layer(block, why)
            return
        layer = self._new_layer(block, layer_kind_of(block.anchor), [_name(n) for n in block.nodes])
        for value, source in zip(inputs, sources, strict=False):
            assert source is not None
            self._take_int8(layer, value, source)
        layer.notes.append("every input through DQ: runs INT8 (C8, C9)")
        self._finish(block, layer, want, want is not None)

    def _concat(self, node: ir.Node) -> None:
        from qdqkit.trt.predict.weighted import concat_layer

        concat_layer(self, node)

    def macs(self, node: ir.Node, weight: ir.Value | None) -> int | None:
        shape = None
        if weight is not None and weight.shape is not None:
            shape = tuple(d if isinstance(d, int) else 1 for d in weight.shape)
        return macs_of(node, shape)
