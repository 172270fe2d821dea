"""What every model rule's check can ask: the prediction's queries, the Q/DQ view, cost wording."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

import onnx_ir as ir

from qdqkit.core.qdq import QdqView, is_dequantize, is_quantize, node_label
from qdqkit.core.text import plural
from qdqkit.rules import Finding, rule
from qdqkit.trt.cost_model import LatencyComparison
from qdqkit.trt.engine import EngineLayer
from qdqkit.trt.predict import Prediction
from qdqkit.trt.predict.fusion import Block
from qdqkit.trt.predict.ops import is_plugin
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


@dataclass
class LintContext:
    prediction: Prediction
    latency: LatencyComparison | None = None  # predicted time as it is and built FP16

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

    def nodes_of(self, *op_types: str) -> list[ir.Node]:
        """The nodes of those op types (any domain), in graph order."""
        by_op = self._node_index[0]
        found = [node for op in op_types for node in by_op.get(op, ())]
        if len(op_types) > 1:
            found.sort(key=self.prediction.facts.order.__getitem__)
        return found

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

    def is_constant(self, value: ir.Value | None) -> bool:
        return self.prediction.facts.is_constant(value)

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
