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

from qdqkit.core.qdq import is_dequantize, is_qdq, is_quantize, node_label
from qdqkit.trt.engine import EngineLayer, EngineTensor, Precision
from qdqkit.trt.predict.fusion import Block
from qdqkit.trt.predict.ops import (
    AVERAGING_POOLS,
    ELIDED_COPY_OPS,
    POINTWISE,
    is_default_domain,
    is_plugin,
    layer_kind_of,
)
from qdqkit.trt.predict.state import Int8Tensor, WalkState, value_name
from qdqkit.trt.predict.wanted import is_commuting, usable_scale
from qdqkit.trt.predict.weighted import concat_layer, weighted_layer


class PrecisionWalk(WalkState):
    """Walks the graph once and appends engine layers in execution order."""

    # ------------------------------------------------------------------ Q nodes
    def handle_quantize(self, q: ir.Node) -> None:
        x = q.inputs[0]
        out = q.outputs[0]
        if x is None:
            return
        x = self.resolve(x)
        scale = usable_scale(self.facts.view.params(q))
        source = self.int8_of(x)  # INT8 already: a commuting op's output, or DQ -> Q (B6)
        if source is not None:
            if scale is not None and source.scale == scale:
                self._cancel(q, x, source)
                return
            names = [node_label(q)]
            dq = x.producer()
            if dq is not None and is_dequantize(dq) and dq not in self.qdq_layer:
                names.append(node_label(dq))  # the DQ -> Q pair becomes this one requantize
            layer = self.reformat(
                node_label(q), names, EngineTensor(source.engine_name, Precision.INT8),
                EngineTensor(value_name(out), Precision.INT8, shape=self.shape(out)),
                f"requantize: the INT8 input has scale {source.scale!r}, the Q wants {scale!r} (B6, E3)",
            )
            self.qdq_layer[q] = layer
            self.int8[out] = Int8Tensor(value_name(out), scale)
            return
        if scale is not None and (x, scale) in self.q_merge:
            layer = self.q_merge[(x, scale)]
            layer.onnx_nodes.append(node_label(q))
            layer.notes.append(f"{node_label(q)} has the same scale on the same tensor: merged (B7)")
            self.qdq_layer[q] = layer
            self.int8[out] = Int8Tensor(layer.outputs[0].name, scale)
            return
        if x.is_graph_input():
            why = "quantize of a network input: nothing earlier to fuse it into (B8, E7)"
        else:
            producer = self.producer_layer.get(x)
            who = f"'{producer.name}'" if producer is not None else f"the producer of '{x.name}'"
            why = f"standalone quantize: {who} writes float, so the Q cannot fuse (E1)"
        layer = self.reformat(
            node_label(q), [node_label(q)], self.float_of(x),
            EngineTensor(value_name(out), Precision.INT8, shape=self.shape(out)), why,
        )
        self.qdq_layer[q] = layer
        self.int8[out] = Int8Tensor(value_name(out), scale)
        self.q_merge[(x, scale)] = layer

    def _cancel(self, q: ir.Node, x: ir.Value, source: Int8Tensor) -> None:
        """A Q on a tensor that is INT8 at the same scale already: it costs nothing (B6)."""
        self.int8[q.outputs[0]] = source
        names = [node_label(q)]
        owner = self.producer_layer.get(x)
        dq = x.producer()
        if dq is not None and is_dequantize(dq) and dq not in self.qdq_layer:
            names.append(node_label(dq))  # DQ -> Q with one scale: the pair vanishes
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
            block = self.block_of.get(node)
            if block is not None and (is_quantize(node) or is_dequantize(node)):
                continue  # an inner tensor's range in an implicit build: part of the layer
            if is_quantize(node):
                self.handle_quantize(node)
                continue
            if is_dequantize(node):
                continue
            if block is None:
                copy = node.op_type in ELIDED_COPY_OPS and is_default_domain(node)
                if copy and node.inputs and node.inputs[0] is not None:
                    self.alias[node.outputs[0]] = node.inputs[0]
                    self.elided.append(node_label(node))
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
            weighted_layer(self, block)
            return
        node = block.anchor
        if is_plugin(node):
            self._float_layer(block, "custom-domain op: an opaque float plugin layer (C19)")
        elif node.op_type == "Concat" and is_default_domain(node):
            concat_layer(self, node)
        elif is_commuting(node):
            self._commuting(block)
        elif node.op_type in AVERAGING_POOLS or node.op_type in POINTWISE or node.op_type == "MatMul":
            self._quantizable(block)
        else:
            self._float_layer(block, "")

    def _float_layer(self, block: Block, why: str) -> None:
        layer = self._block_layer(block)
        for value in self.external_inputs(block):
            layer.inputs.append(self.float_of(value))
        if why:
            layer.notes.append(why)
        self.finish(block, layer, None, False)

    def _block_layer(self, block: Block) -> EngineLayer:
        """The layer of ``block``, named after its nodes; the Q/DQ pairs an implicit build takes
        inside it (fusion rule 3) belong to it without naming it, as in a weighted layer."""
        layer = self.new_layer(block, layer_kind_of(block.anchor),
                               [node_label(n) for n in block.nodes if not is_qdq(n)])
        layer.onnx_nodes += [node_label(n) for n in block.nodes if is_qdq(n)]
        return layer

    def _commuting(self, block: Block) -> None:
        node = block.anchor
        data = node.inputs[0] if node.inputs else None
        source = self.int8_of(data)
        if data is None or source is None:
            self._float_layer(block, "")
            return
        layer = self.new_layer(block, layer_kind_of(node), [node_label(node)])
        self.take_int8(layer, data, source)
        layer.notes.append("Q/DQ commute with this op: it runs INT8 on the dequantized input (B2, B3)")
        self.finish(block, layer, source.scale, True)

    def _quantizable(self, block: Block) -> None:
        inputs = self.external_inputs(block)
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
        layer = self._block_layer(block)
        for value, source in zip(inputs, sources, strict=False):
            assert source is not None
            self.take_int8(layer, value, source)
        layer.notes.append("every input through DQ: runs INT8 (C8, C9)")
        self.finish(block, layer, want, want is not None)
