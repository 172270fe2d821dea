"""Fresh names for the nodes and values a pass adds, unique within one graph."""

from __future__ import annotations

import onnx_ir as ir


def layer_safe(name: str) -> str:
    """``name`` fit to name a node a pass adds: a tensor name may hold any text (one model names
    its output with a JSON label map), but trtexec's ``--layerPrecisions`` splits its list at
    commas, so a node named after such a tensor could never be listed there."""
    return name.replace(",", "_")


def taken_names(graph: ir.Graph) -> set[str]:
    """Every name ``graph`` already uses: inputs, initializers, nodes and node outputs."""
    taken = {v.name for v in graph.inputs if v.name} | set(graph.initializers)
    for node in graph:
        if node.name:
            taken.add(node.name)
        taken.update(o.name for o in node.outputs if o.name)
    return taken


def unique_name(taken: set[str], wanted: str) -> str:
    """``wanted``, or ``wanted_1``, ``wanted_2``... the first not in ``taken``; it is taken then."""
    name, n = wanted, 1
    while name in taken:
        name = f"{wanted}_{n}"
        n += 1
    taken.add(name)
    return name
