"""Wrap a tall layered layout into side-by-side columns, so a deep engine fills a screen.

1. The ranks are cut into columns of equal height; the column count makes the whole drawing about
   ``aspect`` times as wide as it is tall (a screen), and a short graph stays one column.
2. Each column keeps its own horizontal extent and is shifted right of the previous one, with a
   gutter between them; positions and routed edges inside a column move with it.
3. An edge whose ends sit in different columns leaves its source to the right, runs down the
   gutter, along the bottom margin to the gutter before its target's column, and up to the
   target's left side (``links``), so it never crosses a box of another column.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from qdqkit.engine.layout import Layout

COLUMN_GAP = 90.0
MIN_RANKS_PER_COLUMN = 10


@dataclass
class Columns:
    x: list[float]
    y: list[float]
    width: float
    height: float
    column: list[int]  # of each node
    left: list[float]  # left edge of each column
    right: list[float]  # right edge of each column
    routes: dict[tuple[int, int], list[tuple[float, float]]] = field(default_factory=dict)
    arcs: list[tuple[int, int]] = field(default_factory=list)  # long edges inside one column


def ranks_per_column(rank_count: int, rank_pitch: float, column_width: float,
                     aspect: float) -> int:
    if rank_count <= MIN_RANKS_PER_COLUMN:
        return max(rank_count, 1)
    columns = math.sqrt(aspect * rank_count * rank_pitch / column_width)
    columns = max(1, round(columns))
    return max(MIN_RANKS_PER_COLUMN, math.ceil(rank_count / columns))


def wrap_columns(layout: Layout, node_width: float, node_height: float, margin: float,
                 aspect: float = 2.0) -> Columns:
    n = len(layout.x)
    rank_count = max(layout.rank, default=-1) + 1
    per_column = ranks_per_column(rank_count, layout.rank_pitch, node_width + COLUMN_GAP, aspect)
    column = [r // per_column for r in layout.rank]
    column_count = max(column, default=-1) + 1
    low = [math.inf] * column_count
    high = [-math.inf] * column_count
    for i in range(n):
        low[column[i]] = min(low[column[i]], layout.x[i] - node_width / 2)
        high[column[i]] = max(high[column[i]], layout.x[i] + node_width / 2)
    routes_in: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for (u, v), points in layout.routes.items():
        if column[u] == column[v]:
            routes_in[(u, v)] = points
            for px, _py in points:
                low[column[u]] = min(low[column[u]], px - 8)
                high[column[u]] = max(high[column[u]], px + 8)
    arcs = [(u, v) for u, v in layout.arcs if column[u] == column[v]]
    arc_room = {column[u] for u, _v in arcs}
    shift, left, right = [], [], []
    cursor = margin
    for c in range(column_count):
        if low[c] == math.inf:  # no node in this column (cannot happen for ranks of real nodes)
            low[c] = high[c] = 0.0
        shift.append(cursor - low[c])
        left.append(cursor)
        right.append(cursor + high[c] - low[c])
        cursor = right[-1] + (60.0 if c in arc_room else 0.0) + COLUMN_GAP
    lift = [c * per_column * layout.rank_pitch for c in range(column_count)]
    xs = [layout.x[i] + shift[column[i]] for i in range(n)]
    ys = [layout.y[i] - lift[column[i]] for i in range(n)]
    routes = {
        edge: [(px + shift[column[edge[0]]], py - lift[column[edge[0]]]) for px, py in pts]
        for edge, pts in routes_in.items()
    }
    height = min(per_column, rank_count) * layout.rank_pitch + 2 * margin + 30.0
    width = cursor - COLUMN_GAP + margin
    return Columns(xs, ys, max(width, node_width + 2 * margin), height, column, left, right,
                   routes, arcs)


def cross_link(cols: Columns, u: int, v: int, node_width: float, node_height: float,
               bottom: float) -> list[tuple[float, float]]:
    """Points of an orthogonal path from ``u`` (right side) to ``v`` (left side) in another column."""
    cu, cv = cols.column[u], cols.column[v]
    start = (cols.x[u] + node_width / 2, cols.y[u] + node_height / 2)
    end = (cols.x[v] - node_width / 2, cols.y[v] + node_height / 2)
    out_gutter = cols.right[cu] + COLUMN_GAP / 2 - 8
    in_gutter = cols.left[cv] - COLUMN_GAP / 2 + 8
    if cv == cu + 1:
        mid = (out_gutter + in_gutter) / 2
        return [start, (mid, start[1]), (mid, end[1]), end]
    return [start, (out_gutter, start[1]), (out_gutter, bottom), (in_gutter, bottom),
            (in_gutter, end[1]), end]
