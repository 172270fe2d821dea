"""Removing many nodes at once, cheaply: what ``Graph.remove(nodes, safe=True)`` does, minus
detaching the nodes from values that die with them.

``safe=True`` unlinks every input of every removed node, one ``replace_input_with`` call each; when a
Q, its DQ and the Constant nodes of their scale and zero point go together, most of those links
point at values produced inside the removed set, which nothing can reach afterwards. Only the links
to values that stay (an activation, an initializer) are undone, so their use lists stay exact.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx_ir as ir


def remove_together(graph: ir.Graph, nodes: Sequence[ir.Node]) -> None:
    """Remove ``nodes`` from ``graph``; nothing outside them may read their outputs.

    Raises ValueError, changing nothing, when a node's output is a graph output or is read by a
    node that stays (the checks ``safe=True`` makes).
    """
    dead = set(nodes)
    graph_outputs = frozenset(graph.outputs)
    for node in nodes:
        if node.graph is not graph:
            raise ValueError(f"node '{node.name}' does not belong to this graph")
        for out in node.outputs:
            if out in graph_outputs or any(use.node not in dead for use in out.uses()):
                raise ValueError(f"node '{node.name}' is still read outside the removed nodes")
    for node in nodes:
        for index, value in enumerate(node.inputs):
            if value is not None and value.producer() not in dead:
                node.replace_input_with(index, None)
    graph.remove(nodes)
