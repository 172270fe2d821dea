"""What the engine drawing shows: boxes for the layers that matter, zero-cost copies folded away.

1. A copy is *zero-cost* when it is a NoOp (a view TensorRT did not run; real profiles time them
   at 0 ms), or a layout Reformat whose profiled time rounds to 0.000 ms. Such a copy
   gets no box: the edge runs through it, and the box it feeds (or, at the end of the network,
   the box it drains) lists it, so search and hover still find it. Q/DQ Reformats are never
   folded: they are the cost the drawing is about.
2. Edges between boxes follow data flow through the folded copies and take the precision of the
   tensor the receiving box reads.
3. The slowest boxes (``TOP``, fewer in small engines: one in eight) are ranked, so the time is
   visible before any name is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from qdqkit.trt.engine import EngineGraph, EngineLayer, LayerKind, Precision
from qdqkit.trt.engine_analysis import latency_sum, topology

ZERO_COST_MS = 0.0005
TOP = 10


def zero_cost_copy(layer: EngineLayer) -> bool:
    if layer.kind is LayerKind.NOOP:
        return True
    if not layer.is_reformat or layer.origin == "QDQ" or layer.latency_ms is None:
        return False
    return layer.latency_ms < ZERO_COST_MS


@dataclass
class DrawnGraph:
    boxes: list[int]  # layer indices that get a box, in execution order
    preds: list[list[int]]  # by box position
    edge_precision: dict[tuple[int, int], Precision]  # (box position, box position)
    folded: dict[int, list[int]] = field(default_factory=dict)  # box position -> copy layers
    slowest: list[int] = field(default_factory=list)  # box positions, slowest first
    total_ms: float | None = None


def drawn_graph(graph: EngineGraph) -> DrawnGraph:
    topo = topology(graph)
    total = latency_sum(graph.layers)
    n = len(graph.layers)
    folded_flags = [zero_cost_copy(layer) for layer in graph.layers]
    if all(folded_flags):  # nothing else to draw: show the copies themselves
        folded_flags = [False] * n
    position: dict[int, int] = {}
    boxes: list[int] = []
    for i in range(n):
        if not folded_flags[i]:
            position[i] = len(boxes)
            boxes.append(i)
    # feeds[i]: boxes whose output reaches layer i through folded copies only.
    feeds: list[list[tuple[int, Precision]]] = [[] for _ in range(n)]
    pending: list[list[int]] = [[] for _ in range(n)]  # folded copies upstream of layer i
    preds: list[list[int]] = [[] for _ in boxes]
    edge_precision: dict[tuple[int, int], Precision] = {}
    folded: dict[int, list[int]] = {}
    claimed: set[int] = set()
    for i in range(n):
        sources: list[tuple[int, Precision]] = []
        copies: list[int] = []
        for u in topo.preds[i]:
            precision = topo.edge_precision.get((u, i), Precision.UNKNOWN)
            if folded_flags[u]:
                sources += [(box, precision) for box, _ in feeds[u]]
                copies += pending[u] + [u]
            else:
                sources.append((position[u], precision))
        if folded_flags[i]:
            feeds[i] = sources
            pending[i] = copies
            continue
        me = position[i]
        for box, precision in sources:
            if box not in preds[me]:
                preds[me].append(box)
                edge_precision[(box, me)] = precision
        fresh = [c for c in dict.fromkeys(copies) if c not in claimed]
        if fresh:
            claimed.update(fresh)
            folded.setdefault(me, []).extend(fresh)
    # Copies feeding no box (at the outputs, or in a names-only chain's tail) go to their source.
    for i in range(n):
        if folded_flags[i] and i not in claimed:
            owner = feeds[i][0][0] if feeds[i] else (0 if boxes else None)
            if owner is not None:
                folded.setdefault(owner, []).append(i)
    for copies in folded.values():
        copies.sort()
    timed = [(graph.layers[b].latency_ms, p) for p, b in enumerate(boxes)
             if graph.layers[b].latency_ms]
    top = min(TOP, max(3, len(boxes) // 8))
    slowest = [p for _, p in sorted(timed, key=lambda t: (-(t[0] or 0.0), t[1]))[:top]]
    return DrawnGraph(boxes, preds, edge_precision, folded, slowest, total)
