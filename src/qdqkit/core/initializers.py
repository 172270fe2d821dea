"""Initializers a rewrite leaves unread.

A pass that removes nodes (folded BatchNormalizations, replaced Q/DQ) leaves their constants
behind; onnxruntime warns once for each unread initializer when it loads the model, and the
file carries them for nothing. Those the input itself left unread are the user's business and
stay: ``unread_initializers`` before the rewrite, ``drop_orphaned`` after it.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

import onnx_ir as ir


def _read(value: ir.Value) -> bool:
    return bool(value.uses()) or value.is_graph_output() or value.is_graph_input()


def unread_initializers(graph: ir.Graph) -> set[str]:
    """The names of ``graph``'s initializers nothing reads (nor lists as an input or output)."""
    return {name for name, value in graph.initializers.items() if not _read(value)}


def drop_orphaned(graph: ir.Graph, unread_before: AbstractSet[str]) -> list[str]:
    """Remove the initializers nothing reads any more, except those in ``unread_before``;
    their names, in the graph's order."""
    dropped = [name for name, value in graph.initializers.items()
               if name not in unread_before and not _read(value)]
    for name in dropped:
        graph.initializers.pop(name)
    return dropped
