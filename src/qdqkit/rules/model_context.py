"""What every model rule's check can ask: the prediction's queries, the Q/DQ view, cost wording."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property

import onnx_ir as ir

from qdqkit.core.constants import constant_array
from qdqkit.core.qdq import INT8_TYPES, QdqView, is_dequantize, is_quantize, node_label
from qdqkit.core.text import plural
from qdqkit.rules import Finding, rule
from qdqkit.trt.cost_model import LatencyComparison
from qdqkit.trt.engine import EngineLayer, Precision
from qdqkit.trt.predict import Prediction
from qdqkit.trt.predict.fusion import Block
from qdqkit.trt.predict.ops import NO_OP_COPIES, is_default_domain, is_plugin
from qdqkit.trt.predict.wanted import usable_scale


def block_label(name: str) -> str:
    """The module a node belongs to, from its name: 'layer2.1.conv2' -> 'layer2.1'."""
    for sep in ("/", "."):
        if sep in name.strip(sep):
            head = name.strip(sep).rsplit(sep, 1)[0]
            return head or name
    return name


def module_label(block: Block) -> str:
    """The module a fused layer implements: from its weight's name when it has one."""
    node = block.weighted or block.anchor
    weight = block.weight.source.name if block.weight is not None else None
    if weight and weight.endswith(".weight"):
        module = weight.removesuffix(".weight")
        while "." in module and module.rsplit(".", 1)[1].isdigit():
            module = module.rsplit(".", 1)[0]  # 'layer2.0.downsample.0' is in 'layer2.0'
        return block_label(module)
    return block_label(node_label(node))


@dataclass(frozen=True)
class PredictedBlock:
    """A fused block, the engine layer it became, and whether that layer computes in INT8."""

    block: Block
    layer: EngineLayer
    int8_compute: bool

    @property
    def anchor(self) -> ir.Node:
        return self.block.anchor


# Normalizations subtract a mean from its own input and average squares: their ReduceMeans are
# statistics, not pools, whatever axes they reduce.
_SQUARES = frozenset({"Pow", "ReduceSumSquare"})


@dataclass
class LintContext:
    prediction: Prediction
    latency: LatencyComparison | None = None  # predicted time as it is and built FP16
    # weighted ops the model records as kept float on purpose, with why (core.kept_float)
    kept_float: Mapping[str, str] = field(default_factory=dict)

    @property
    def view(self) -> QdqView:
        return self.prediction.facts.view

    @property
    def graph(self) -> ir.Graph:
        return self.prediction.facts.graph

    @cached_property
    def _node_index(self) -> tuple[dict[str, list[ir.Node]], list[ir.Node]]:
        # One pass for all rules: a rule scanning the whole graph for one op type touches every
        # node object again, and at tens of thousands of nodes each such scan is memory-bound.
        by_op: dict[str, list[ir.Node]] = {}
        plugins: list[ir.Node] = []
        for node in self.graph:
            by_op.setdefault(node.op_type, []).append(node)
            if is_plugin(node):
                plugins.append(node)
        return by_op, plugins

    def op_types(self) -> list[str]:
        """The op types the graph holds (any domain), in first-seen order."""
        return list(self._node_index[0])

    def nodes_of(self, *op_types: str) -> list[ir.Node]:
        """The nodes of those op types (any domain), in graph order."""
        by_op = self._node_index[0]
        found = [node for op in op_types for node in by_op.get(op, ())]
        if len(op_types) > 1:
            found.sort(key=self.prediction.facts.order.__getitem__)
        return found

    def predicted_blocks(self, *, weighted: bool | None = None) -> Iterator[PredictedBlock]:
        """Each fused block that became a layer (elided copies and Concats skipped), in order.

        ``weighted`` True keeps only blocks with a weighted op, False only blocks without one
        (plugins left out: their own rules judge them). The one walk the residual (QDQ201/204),
        INT8-in-float-out (QDQ205) and pool (QDQ304) checks share.
        """
        prediction = self.prediction
        for block in prediction.blocks:
            layer = prediction.block_layer(block)
            if layer is None or (weighted is not None and (block.weighted is not None) != weighted):
                continue
            if weighted is False and is_plugin(block.anchor):
                continue
            if block.weighted is not None:
                cost = prediction.cost_of(layer)
                int8 = cost is not None and cost.int8_compute
            else:
                int8 = layer.precision == Precision.INT8
            yield PredictedBlock(block, layer, int8)

    def dequantized_inputs(self, block: Block) -> list[ir.Node]:
        """The DQ nodes through which ``block`` reads INT8 tensors from outside itself."""
        prediction = self.prediction
        return [d for v in prediction.external_inputs(block) if prediction.int8_of(v) is not None
                and (d := v.producer()) is not None and is_dequantize(d)]

    def int8_around(self, value: ir.Value, reader: ir.Node) -> tuple[bool, bool]:
        """Whether the layer writing ``value`` computes INT8, and whether ``reader``'s output is
        wanted in INT8 by its own readers."""
        prediction = self.prediction
        producer = prediction.producer_layer(value)
        cost = prediction.cost_of(producer) if producer is not None else None
        before = cost is not None and cost.int8_compute
        return before, any(prediction.wanted_scale(out) is not None for out in reader.outputs)

    def is_spatial_pool(self, node: ir.Node) -> bool:
        """Whether an averaging node pools: AveragePool/GlobalAveragePool, or a ReduceMean over
        spatial axes only (2 and up) of a tensor of rank 3 or more that is not a normalization's
        statistic (a mean its own input is centered by, or a mean of squares)."""
        if node.op_type in ("AveragePool", "GlobalAveragePool"):
            return True
        if node.op_type != "ReduceMean" or not node.inputs or node.inputs[0] is None:
            return False
        source = node.inputs[0]
        shape = self.prediction.facts.shape_of(source)
        axes = self._reduced_axes(node)
        if shape is None or axes is None or len(shape) < 3:
            return False
        rank = len(shape)
        normalized = {a + rank if a < 0 else a for a in axes}
        if not normalized or not normalized <= set(range(2, rank)):
            return False
        producer = source.producer()
        if producer is not None and (producer.op_type in _SQUARES or (
                producer.op_type == "Mul" and len(producer.inputs) == 2
                and producer.inputs[0] is producer.inputs[1])):
            return False
        mean = node.outputs[0]
        return not any(use.node.op_type == "Sub" and any(v is mean for v in use.node.inputs)
                       for use in source.uses())

    def _reduced_axes(self, node: ir.Node) -> list[int] | None:
        attr = node.attributes.get("axes")
        if attr is not None:
            return list(attr.as_ints())
        if len(node.inputs) > 1 and node.inputs[1] is not None:
            axes = constant_array(node.inputs[1])
            return None if axes is None else [int(a) for a in axes.reshape(-1)]
        return None  # every axis: a global mean, not a pool

    def plugin_nodes(self) -> list[ir.Node]:
        """Custom-domain nodes (TensorRT plugins), in graph order."""
        return list(self._node_index[1])

    def finding(self, code: str, message: str, *, nodes: Iterable[str] = (),
                tensors: Iterable[str] = (), cost: str = "") -> Finding:
        return Finding(code=code, severity=rule(code).severity, message=message,
                       nodes=list(nodes), tensors=list(tensors), cost=cost)

    def reformat_finding(
        self, code: str, message: str, anchor: ir.Node, reformats: list[EngineLayer], *,
        tensors: Iterable[str], consequence: str = "",
    ) -> Finding:
        """A finding at ``anchor`` whose cost is the Reformat layers it causes (named as nodes too)."""
        return self.finding(
            code, message,
            nodes=[node_label(anchor), *(n for r in reformats for n in r.onnx_nodes)],
            tensors=tensors, cost=self.reformat_cost(reformats, consequence),
        )

    def scale(self, node: ir.Node) -> float | None:
        return usable_scale(self.view.params(node))

    def dq_of(self, value: ir.Value | None) -> ir.Node | None:
        producer = value.producer() if value is not None else None
        if producer is None or not is_dequantize(producer) or self.is_constant(value):
            return None
        return producer

    def unwrap_qdq(self, value: ir.Value | None) -> tuple[ir.Value | None, list[ir.Node]]:
        """``value`` with one DQ(Q(x)) pair peeled off, and the pair's nodes."""
        dq = self.dq_of(value)
        if dq is None:
            return value, []
        q = self.view.quantize_of(dq)
        if q is None or q.inputs[0] is None:
            return value, []
        return q.inputs[0], [q, dq]

    @staticmethod
    def past_copies(reader: ir.Node, value: ir.Value) -> tuple[ir.Node, ir.Value]:
        """The op that reads ``value`` once the no-op copies are passed (an Identity or
        Dropout, as paddle2onnx writes after almost every op), with the tensor it reads: a copy
        whose output one op alone reads leads to that op. Fusion passes these copies too
        (``trt.predict.fusion.is_epilogue_op``)."""
        for _ in range(64):
            if reader.op_type not in NO_OP_COPIES or not is_default_domain(reader) or (
                    not reader.inputs or reader.inputs[0] is not value or not reader.outputs):
                break
            out = reader.outputs[0]
            uses = list(out.uses())
            if len(uses) != 1 or out.is_graph_output():
                break
            reader, value = uses[0].node, out
        return reader, value

    def skip_needed_in_int8(self, add: ir.Node, residual: ir.Value) -> bool:
        """Whether a residual Add's INT8 skip (``residual``, a DQ's output) is one its writer
        writes in INT8 for other readers too. Then a block that writes float (its readers are
        float math) dequantizes the skip in a Reformat that no placement removes: with a float
        skip the writer would have to write float as well, and the Reformat only moves (C4)."""
        source, pair = self.unwrap_qdq(residual)
        if not pair or self.prediction.reformat_of(pair[0]) is not None:
            return False  # the skip's Q is a Reformat itself: its writer writes float
        if self.prediction.int8_of(source) is None:
            return False
        readers = {use.node for dq in pair[0].outputs[0].uses() for out in dq.node.outputs
                   for use in out.uses()}
        if not readers - {add}:
            return False
        # A reader of the block that sits between INT8 layers (an average pool before a quantized
        # head: QDQ304) can run INT8 itself, and then the block writes INT8 and the Reformat goes.
        block = self.prediction.block_of(add)
        for use in block.output.uses() if block is not None else ():
            layer = self.prediction.layer_of(use.node)
            if layer is not None and self.prediction.reformats_reading(layer):
                return False
        return True

    def is_constant(self, value: ir.Value | None) -> bool:
        return self.prediction.facts.is_constant(value)

    def is_constant_input(self, qdq: ir.Node) -> bool:
        """Whether a Q/DQ reads a constant (a folded DQ dequantizes a weight, whatever its input
        looks like)."""
        return ((qdq in self.prediction.facts.folded_nodes and is_dequantize(qdq))
                or self.is_constant(qdq.inputs[0]))

    @cached_property
    def other_type_qdq(self) -> list[ir.Node]:
        """The Q/DQ nodes quantizing to another type than INT8 (FP8, INT4, FP4...), in order;
        a DQ of a constant bias (int32, as onnxruntime writes it) is not one: QDQ409 names it."""
        view = self.view
        found = []
        for node in (*view.quantize_nodes, *view.dequantize_nodes):
            params = view.params(node)
            if params is None or params.quant_dtype in INT8_TYPES:
                continue
            if is_dequantize(node) and self.is_constant_input(node) and _bias_only(node):
                continue
            found.append(node)
        return found

    def activation_quantizers(self, value: ir.Value) -> list[ir.Node]:
        return [u.node for u in value.uses() if is_quantize(u.node) and u.idx == 0]

    def quantizer_scales(self, value: ir.Value) -> set[float | None]:
        """The scales of the activation Qs reading ``value``."""
        return {self.scale(q) for q in self.activation_quantizers(value)}

    def reformats_of(self, nodes: Iterable[ir.Node | None]) -> list[EngineLayer]:
        """The standalone Reformats of those Q/DQ nodes that did not fuse, in the nodes' order."""
        found = (self.prediction.reformat_of(n) for n in nodes if n is not None)
        return [layer for layer in found if layer is not None]

    def reformat_cost(self, layers: list[EngineLayer], tail: str = "") -> str:
        if not layers and tail:
            return tail
        text = f"+{plural(len(layers), 'Reformat layer')}"
        if layers:
            text += " (" + ", ".join(layer.name for layer in layers[:3])
            text += ", ..." if len(layers) > 3 else ""
            text += ")"
        return f"{text}; {tail}" if tail else text


def _bias_only(dq: ir.Node) -> bool:
    """Whether every reader of the DQ's output reads it as a bias (``passes.float_bias``)."""
    from qdqkit.passes.float_bias import BIASED_OPS

    uses = dq.outputs[0].uses()
    return bool(uses) and all(use.node.op_type in BIASED_OPS and use.idx == 2 for use in uses)
