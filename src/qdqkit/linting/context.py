"""What every check can ask: the prediction, the Q/DQ view, and cost wording from the engine."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

import onnx_ir as ir

from qdqkit.core.qdq import QdqView, is_dequantize, is_quantize, node_label
from qdqkit.linting.catalog import RULES_BY_CODE
from qdqkit.linting.result import Finding
from qdqkit.trt.engine import EngineLayer
from qdqkit.trt.predict import Prediction
from qdqkit.trt.predict.fusion import Block
from qdqkit.trt.predict.wanted import usable_scale


def name_of(node: ir.Node) -> str:
    return node.name or node_label(node)


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
    return block_label(name_of(node))


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


@dataclass
class LintContext:
    prediction: Prediction

    @property
    def view(self) -> QdqView:
        return self.prediction.facts.view

    @property
    def graph(self) -> ir.Graph:
        return self.prediction.facts.graph

    def finding(self, code: str, message: str, *, nodes: Iterable[str] = (),
                tensors: Iterable[str] = (), cost: str = "") -> Finding:
        rule = RULES_BY_CODE[code]
        return Finding(code, rule.severity, message, list(nodes), list(tensors), cost)

    def layer_of(self, node: ir.Node) -> EngineLayer | None:
        walk = self.prediction.walk
        if node in walk.qdq_layer:
            return walk.qdq_layer[node]
        if node in walk.absorbed_into:
            return walk.absorbed_into[node]
        block = walk.block_of.get(node)
        return walk.layer_of_block.get(block) if block is not None else None

    @cached_property
    def _qdq_reformats_by_input(self) -> dict[str, list[EngineLayer]]:
        # Built once, so asking per finding stays linear in the engine's size.
        index: dict[str, list[EngineLayer]] = {}
        for layer in self.prediction.engine.layers:
            if layer.origin == "QDQ":
                for name in dict.fromkeys(t.name for t in layer.inputs):
                    index.setdefault(name, []).append(layer)
        return index

    def reformats_reading(self, layer: EngineLayer) -> list[EngineLayer]:
        """Q/DQ Reformat layers that read one of ``layer``'s outputs, in engine order."""
        found: dict[int, EngineLayer] = {}
        for tensor in layer.outputs:
            for other in self._qdq_reformats_by_input.get(tensor.name, []):
                found.setdefault(id(other), other)
        return list(found.values())

    def reformat_finding(
        self, code: str, message: str, anchor: ir.Node, reformats: list[EngineLayer], *,
        tensors: Iterable[str], consequence: str = "",
    ) -> Finding:
        """A finding at ``anchor`` whose cost is the Reformat layers it causes (named as nodes too)."""
        return self.finding(
            code, message,
            nodes=[name_of(anchor), *(n for r in reformats for n in r.onnx_nodes)],
            tensors=tensors, cost=self.reformat_cost(reformats, consequence),
        )

    def scale(self, node: ir.Node) -> float | None:
        return usable_scale(self.view.params(node))

    def dq_of(self, value: ir.Value | None) -> ir.Node | None:
        producer = value.producer() if value is not None else None
        if producer is None or not is_dequantize(producer) or self.is_constant(value):
            return None
        return producer

    def is_constant(self, value: ir.Value | None) -> bool:
        return self.prediction.facts.is_constant(value)

    def activation_quantizers(self, value: ir.Value) -> list[ir.Node]:
        return [u.node for u in value.uses() if is_quantize(u.node) and u.idx == 0]

    def reformat_cost(self, layers: list[EngineLayer], tail: str = "") -> str:
        if not layers and tail:
            return tail
        text = f"+{plural(len(layers), 'Reformat layer')}"
        if layers:
            text += " (" + ", ".join(layer.name for layer in layers[:3])
            text += ", ..." if len(layers) > 3 else ""
            text += ")"
        return f"{text}; {tail}" if tail else text
