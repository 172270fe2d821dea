"""NameUnnamedNodes and RenameNodeOutputs: the node and tensor names TensorRT will report.

Rules (NameUnnamedNodes):
1. A node without a name gets ``<op_type>_<n>``, with ``n`` the first number that makes it unique,
   so every ``--layerPrecisions`` entry names a real layer.

Rules (RenameNodeOutputs, the reference's ``--rename_node_outputs``):
1. A node's first output is renamed to the node's name and output ``k > 0`` to ``<node>_<k>``.
2. Graph inputs and graph outputs keep their names; a name already taken gets a ``_<n>`` suffix.
"""

from __future__ import annotations

import onnx_ir as ir


class NameUnnamedNodes(ir.passes.InPlacePass):
    def __init__(self) -> None:
        super().__init__()
        self.named = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if all(node.name for node in model.graph):
            return ir.passes.PassResult(model, modified=False)  # the usual case: one cheap walk
        taken = {node.name for node in model.graph if node.name}
        counters: dict[str, int] = {}
        for node in model.graph:
            if node.name:
                continue
            n = counters.get(node.op_type, 0)
            while f"{node.op_type}_{n}" in taken:
                n += 1
            node.name = f"{node.op_type}_{n}"
            taken.add(node.name)
            counters[node.op_type] = n + 1
            self.named += 1
        return ir.passes.PassResult(model, modified=self.named > 0)


class RenameNodeOutputs(ir.passes.InPlacePass):
    def __init__(self) -> None:
        super().__init__()
        self.renamed = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        fixed = {v.name for v in graph.inputs} | {v.name for v in graph.outputs}
        fixed |= set(graph.initializers)
        taken = set(fixed)
        for node in graph:
            for k, out in enumerate(node.outputs):
                if out.is_graph_output() or not node.name:
                    continue
                wanted = node.name if k == 0 else f"{node.name}_{k}"
                name, n = wanted, 1
                while name in taken:
                    name = f"{wanted}_{n}"
                    n += 1
                if out.name != name:
                    out.name = name
                    self.renamed += 1
                taken.add(name)
        return ir.passes.PassResult(model, modified=self.renamed > 0)
