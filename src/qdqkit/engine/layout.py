"""Layered (Sugiyama-style) layout of a DAG, small enough to read and fast on 1000+ nodes.

1. Layering: each node sits one rank below its deepest predecessor (longest path from a source).
2. Edges spanning several ranks get a chain of thin virtual nodes so they route between the boxes
   and take part in ordering; edges longer than ``MAX_ROUTED_SPAN`` are drawn as side arcs instead,
   which keeps a graph with a few very long skips from growing hundreds of virtual nodes.
3. Ordering: a few down/up sweeps sort each rank by the barycenter (mean position) of its
   neighbours in the rank before, which removes most crossings.
4. Coordinates: each node is pulled towards the mean x of its neighbours while keeping the rank's
   order and spacing; that least-squares problem is solved exactly by isotonic regression (pool
   adjacent violators), so chains come out straight.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_ROUTED_SPAN = 48
_ORDER_SWEEPS = 4
_COORD_SWEEPS = 8


@dataclass
class Layout:
    x: list[float]  # centre of each real node
    y: list[float]  # top of each real node
    width: float
    height: float
    routes: dict[tuple[int, int], list[tuple[float, float]]] = field(default_factory=dict)
    arcs: list[tuple[int, int]] = field(default_factory=list)  # long edges drawn as side arcs
    rank: list[int] = field(default_factory=list)  # of each real node
    rank_pitch: float = 0.0  # vertical distance between ranks


def _ranks(n: int, preds: list[list[int]]) -> list[int]:
    rank = [0] * n
    for v in range(n):  # nodes arrive in execution order, so predecessors are already ranked
        for u in preds[v]:
            if u < v:
                rank[v] = max(rank[v], rank[u] + 1)
    return rank


def _isotonic(targets: list[float], weights: list[float]) -> list[float]:
    """Non-decreasing fit minimizing sum w*(y - t)^2 (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [weighted mean, total weight, count]
    for t, w in zip(targets, weights, strict=True):
        blocks.append([t, w, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2, c2 = blocks.pop()
            m1, w1, c1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, c1 + c2])
    fitted: list[float] = []
    for mean, _w, count in blocks:
        fitted.extend([mean] * int(count))
    return fitted


def _pull(node: int, near: list[int], x: list[float], real_count: int) -> float:
    """Where a node wants to be: over its neighbours, over its real ones when it has any.

    Ignoring virtual (long-edge) neighbours keeps the main chain straight and lets skip edges bend
    around it; otherwise every residual join pulls the chain sideways and a deep network drifts
    across the page.
    """
    if node < real_count:
        real = [m for m in near if m < real_count]
        near = real or near
    if not near:
        return x[node]
    return sum(x[m] for m in near) / len(near)


def layered_layout(
    n: int, preds: list[list[int]], node_width: float, node_height: float,
    rank_gap: float, node_gap: float, virtual_width: float = 14.0,
) -> Layout:
    rank = _ranks(n, preds)
    # Virtual nodes get ids n, n+1, ...; ``up``/``down`` hold neighbours one rank away.
    up: list[list[int]] = [[] for _ in range(n)]
    down: list[list[int]] = [[] for _ in range(n)]
    node_rank = list(rank)
    chains: dict[tuple[int, int], list[int]] = {}
    arcs: list[tuple[int, int]] = []

    def new_node(r: int) -> int:
        node_rank.append(r)
        up.append([])
        down.append([])
        return len(node_rank) - 1

    for v in range(n):
        for u in preds[v]:
            if u >= v:
                continue
            span = rank[v] - rank[u]
            if span > MAX_ROUTED_SPAN:
                arcs.append((u, v))
                continue
            previous, chain = u, []
            for r in range(rank[u] + 1, rank[v]):
                virtual = new_node(r)
                chain.append(virtual)
                down[previous].append(virtual)
                up[virtual].append(previous)
                previous = virtual
            down[previous].append(v)
            up[v].append(previous)
            chains[(u, v)] = chain

    total = len(node_rank)
    rank_count = max(node_rank, default=-1) + 1
    rows: list[list[int]] = [[] for _ in range(rank_count)]
    for node in range(total):  # real nodes in execution order, virtual ones after their source
        rows[node_rank[node]].append(node)
    position = [0.0] * total
    for row in rows:
        for i, node in enumerate(row):
            position[node] = float(i)

    def sweep(row_ids: range, neighbours: list[list[int]]) -> None:
        for r in row_ids:
            row = rows[r]
            keys = []
            for node in row:
                near = neighbours[node]
                bary = sum(position[m] for m in near) / len(near) if near else position[node]
                keys.append((bary, position[node], node))
            keys.sort()
            rows[r] = [node for _, _, node in keys]
            for i, node in enumerate(rows[r]):
                position[node] = float(i)

    for _ in range(_ORDER_SWEEPS):
        sweep(range(1, rank_count), up)
        sweep(range(rank_count - 2, -1, -1), down)

    width_of = [node_width if node < n else virtual_width for node in range(total)]
    x = [0.0] * total
    for row in rows:
        offset = 0.0
        for i, node in enumerate(row):
            if i:
                offset += (width_of[row[i - 1]] + width_of[node]) / 2 + node_gap
            x[node] = offset
        shift = offset / 2
        for node in row:
            x[node] -= shift

    def place(row_ids: range, neighbours: list[list[int]]) -> None:
        for r in row_ids:
            row = rows[r]
            offsets, targets, weights = [], [], []
            offset = 0.0
            for i, node in enumerate(row):
                if i:
                    offset += (width_of[row[i - 1]] + width_of[node]) / 2 + node_gap
                desired = _pull(node, neighbours[node], x, n)
                offsets.append(offset)
                targets.append(desired - offset)
                # Real boxes hold their place; thin virtual nodes step aside.
                weights.append(1.0 if node >= n else 1000.0)
            for node, fitted, off in zip(row, _isotonic(targets, weights), offsets, strict=True):
                x[node] = fitted + off

    for _ in range(_COORD_SWEEPS):
        place(range(1, rank_count), up)
        place(range(rank_count - 2, -1, -1), down)

    left = min((x[node] - width_of[node] / 2 for node in range(total)), default=0.0)
    right = max((x[node] + width_of[node] / 2 for node in range(total)), default=0.0)
    margin = node_gap
    xs = [value - left + margin for value in x]
    ys = [r * (node_height + rank_gap) + margin for r in node_rank]
    routes = {
        edge: [(xs[c], ys[c] + node_height / 2) for c in chain] for edge, chain in chains.items()
    }
    return Layout(
        x=xs[:n], y=ys[:n], width=right - left + 2 * margin + (80.0 if arcs else 0.0),
        height=rank_count * (node_height + rank_gap) - rank_gap + 2 * margin,
        routes=routes, arcs=arcs, rank=rank, rank_pitch=node_height + rank_gap,
    )
