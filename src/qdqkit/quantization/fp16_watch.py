"""Which float tensors calibration watches for the FP16 remainder (``passes.float16_remainder``).

The remainder keeps FP32 what would overflow FP16, so it needs the range of every float tensor
TensorRT writes to memory. A tensor inside a fused layer never does: TensorRT computes the layer's
epilogue on the accumulator and writes only the layer's output. Rules, on the blocks the engine
predictor forms for the float model (``trt.predict.fusion``, as placement does):

1. A float tensor is interior when its producer and its single reader are in one weighted block
   (a Conv/Gemm/MatMul and its BatchNormalization/bias/activation epilogue, and the residual Add
   the predictor fuses into it), the tensor is not a quantization point, and no node of the block
   holds a float constant beyond FP16 (such a node is kept FP32 on its own, which would split the
   layer). Every other float tensor is watched.
   The Add's input from its own block stays interior once Q/DQ are inserted: the predictor picks
   the Add's owner on the float model (C5), placement puts Q/DQ only on the other (skip) input,
   and ``settle`` re-places the same float model, so no round puts a Q/DQ on that input. A DQ or
   a remainder Cast on the skip only takes that input out of the running; the owner's chain has
   nothing inserted inside it (the remainder decides a block whole, rule 2). So every round's
   model fuses the Add on the same input, which TensorRT never writes.
2. An interior tensor is not observed: onnxruntime can then fuse its producer and reader too.
   Its range for the remainder is the hull of the observed ranges of the block's boundary tensors
   (its outside data inputs and its output, quantization points included), so a block whose
   boundary overflows is kept FP32 whole rather than split around an unobserved tensor (nor left
   FP16 should its output's Q/DQ later be dropped); with no observed boundary it has no range.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import onnx_ir as ir

from qdqkit.core.qdq import FLOAT_TYPES, QdqView
from qdqkit.core.shapes import ValueTypes
from qdqkit.passes.float16_remainder import beyond_float16
from qdqkit.trt.predict.fusion import Block, collect_facts, form_blocks


@dataclass
class Fp16Watch:
    """Tensors to watch, and per interior tensor the boundary tensors whose range stands in."""

    tensors: list[str]
    stand_ins: dict[str, list[str]] = field(default_factory=dict)

    def ranges(
        self, watched: Mapping[str, tuple[float, float]],
        quantized: Mapping[str, tuple[float, float]] | None = None,
    ) -> dict[str, tuple[float, float]]:
        """The ``watched`` ranges plus each interior tensor's stand-in (rule 2), the hull of its
        block's boundary among ``watched`` and the ``quantized`` tensors' observed ranges."""
        ranges = dict(watched)
        observed = {**(quantized or {}), **watched}
        for tensor, boundary in self.stand_ins.items():
            known = [observed[name] for name in boundary if name in observed]
            if known:
                ranges[tensor] = (min(low for low, _ in known), max(high for _, high in known))
        return ranges


def fp16_watch(model: ir.Model, types: ValueTypes, quantized: set[str]) -> Fp16Watch:
    """The watch list and stand-ins for ``model`` whose quantization points are ``quantized``."""
    graph = model.graph
    facts = collect_facts(graph, QdqView(graph), types)
    _, block_of = form_blocks(facts)
    watch: list[str] = []
    stand_ins: dict[str, list[str]] = {}
    boundaries: dict[Block, list[str]] = {}
    for node in graph:
        for value in node.outputs:
            dtype = value.dtype or types.dtype_of(value)
            if not value.name or dtype not in FLOAT_TYPES:
                continue
            block = _interior_block(value, block_of, quantized)
            if block is None:
                watch.append(value.name)
                continue
            if block not in boundaries:
                boundaries[block] = _boundary(block)
            stand_ins[value.name] = boundaries[block]
    return Fp16Watch(watch, stand_ins)


def _interior_block(
    value: ir.Value, block_of: Mapping[ir.Node, Block], quantized: set[str]
) -> Block | None:
    """The weighted block ``value`` lies inside (rule 1), or None."""
    producer = value.producer()
    uses = list(value.uses())
    if producer is None or len(uses) != 1 or value.is_graph_output() or value.name in quantized:
        return None
    reader = uses[0].node
    block = block_of.get(producer)
    if block is None or block.weighted is None or block_of.get(reader) is not block:
        return None
    if not _fp16_constants(block):
        return None
    return block


def _fp16_constants(block: Block) -> bool:
    """No float constant a node of ``block`` reads reaches beyond FP16."""
    for node in block.nodes:
        for value in node.inputs:
            if value is None or value.const_value is None:
                continue
            if beyond_float16(value.const_value.numpy()):
                return False
    return True


def _boundary(block: Block) -> list[str]:
    """The block's computed inputs from outside it and its outputs, by name."""
    inside = {*block.nodes, *block.folded}
    names: dict[str, None] = {}
    for node in inside:
        for value in node.inputs:
            if value is None or not value.name or value.const_value is not None:
                continue
            producer = value.producer()
            if producer is None or producer not in inside:
                names[value.name] = None
        for value in node.outputs:
            if value.name and (value.is_graph_output()
                               or any(use.node not in inside for use in value.uses())):
                names[value.name] = None
    return list(names)
