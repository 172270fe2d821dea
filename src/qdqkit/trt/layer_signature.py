"""What a layer is, independent of its name: the evidence the engine matcher pairs layers by.

1. The *skeleton* of an engine is its arithmetic layers (convolutions, matrix multiplies, pooling,
   pointwise, ...) linked by data flow, with the data-movement layers between them (Reformats,
   Q/DQ Reformats, NoOps, Shuffles, Constants) contracted away: an FP16 build and a Q/DQ build of
   one network differ in those, not in their arithmetic.
2. A skeleton layer's own label is its kind class, its weight count and its input shape without the
   batch dimension (what it computes from, so a pooling fused after a convolution changes nothing);
   only the features both engines report are used, so a names-only export still compares by kind.
3. Refined labels (Weisfeiler-Lehman) fold in the labels of the neighbours, one step further each
   round: a label unique in both engines after k rounds picks one layer and its surroundings k
   steps out. Each round is linear in the edges.
"""

from __future__ import annotations

from dataclasses import dataclass

from qdqkit.trt.engine import EngineGraph, EngineLayer, LayerKind
from qdqkit.trt.engine_analysis import topology
from qdqkit.trt.onnx_names import is_auto_numbered, unwrap_node_names

_DATA_MOVEMENT = frozenset({
    LayerKind.REFORMAT, LayerKind.QUANTIZE, LayerKind.DEQUANTIZE, LayerKind.NOOP,
    LayerKind.SHUFFLE, LayerKind.CONSTANT,
})
# Builds fuse and lower the same arithmetic into different layer types (a Gemm becomes a 1x1
# convolution, a pointwise chain a PointWise or an ElementWise layer); compare by class.
_KIND_CLASS: dict[LayerKind, str] = {
    LayerKind.CONVOLUTION: "linear", LayerKind.FULLY_CONNECTED: "linear",
    LayerKind.MATRIX_MULTIPLY: "linear",
    LayerKind.POINTWISE: "pointwise", LayerKind.ELEMENTWISE: "pointwise",
    LayerKind.ACTIVATION: "pointwise", LayerKind.SCALE: "pointwise",
    LayerKind.REFORMAT: "reformat", LayerKind.QUANTIZE: "reformat",
    LayerKind.DEQUANTIZE: "reformat",
}
MAX_ROUNDS = 12


def kind_class(layer: EngineLayer) -> str:
    return _KIND_CLASS.get(layer.kind, layer.kind.value)


def is_skeleton(layer: EngineLayer) -> bool:
    return layer.kind not in _DATA_MOVEMENT


def weight_count(layer: EngineLayer) -> int | None:
    """``Weights.Count`` of the layer (``ConvWeights`` in fused ConvActPool layers)."""
    for key, value in layer.extra.items():
        if key.endswith("Weights") and isinstance(value, dict):
            count = value.get("Count")
            if isinstance(count, int):
                return count
    return None


def input_shape(layer: EngineLayer) -> tuple[int, ...] | None:
    """The first input's shape without the batch dimension and trailing ones (a builder may
    read a flattened ``512`` where another reads ``512x1x1``)."""
    if not layer.inputs or layer.inputs[0].shape is None:
        return None
    dims = list(layer.inputs[0].shape[1:])
    while dims and dims[-1] == 1:
        dims.pop()
    return tuple(dims)


def strong_names(layer: EngineLayer) -> list[str]:
    return [n for n in unwrap_node_names(layer.onnx_nodes) if not is_auto_numbered(n)]


@dataclass
class Skeleton:
    """One engine's skeleton: ``members`` are layer indices; links are by layer index."""

    members: list[int]
    preds: dict[int, list[int]]
    succs: dict[int, list[int]]
    before: dict[int, frozenset[int]]  # every layer -> nearest skeleton layers feeding it
    after: dict[int, frozenset[int]]  # every layer -> nearest skeleton layers it feeds
    # Main links follow each layer's first input only: what a convolution convolves stays the
    # same when another build fuses a residual Add (its second input) into another layer.
    main_preds: dict[int, list[int]]
    main_succs: dict[int, list[int]]


def skeleton(graph: EngineGraph) -> Skeleton:
    topo = topology(graph)
    n = len(graph.layers)
    in_skeleton = [is_skeleton(layer) for layer in graph.layers]
    # reach_up[v]: skeleton layers whose output reaches v through data movement only.
    reach_up: list[frozenset[int]] = [frozenset()] * n
    before: dict[int, frozenset[int]] = {}
    for v in range(n):
        found: set[int] = set()
        for u in topo.preds[v]:
            found |= {u} if in_skeleton[u] else reach_up[u]
        before[v] = frozenset(found)
        reach_up[v] = before[v]
    after: dict[int, frozenset[int]] = {}
    reach_down: list[frozenset[int]] = [frozenset()] * n
    for v in range(n - 1, -1, -1):
        found = set()
        for w in topo.succs[v]:
            found |= {w} if in_skeleton[w] else reach_down[w]
        after[v] = frozenset(found)
        reach_down[v] = after[v]
    members = [i for i in range(n) if in_skeleton[i]]
    preds = {i: sorted(before[i]) for i in members}
    succs = {i: sorted(after[i]) for i in members}
    main_preds, main_succs = _main_links(graph, in_skeleton)
    return Skeleton(members, preds, succs, before, after, main_preds, main_succs)


def _main_links(
    graph: EngineGraph, in_skeleton: list[bool]
) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    has_tensors = any(layer.inputs or layer.outputs for layer in graph.layers)
    producer: dict[str, int] = {}
    main_up: list[int | None] = []  # nearest skeleton layer up the first-input chain
    main_preds: dict[int, list[int]] = {}
    main_succs: dict[int, list[int]] = {}
    for v, layer in enumerate(graph.layers):
        if has_tensors:
            u = producer.get(layer.inputs[0].name) if layer.inputs else None
        else:
            u = v - 1 if v else None
        source = None if u is None else (u if in_skeleton[u] else main_up[u])
        main_up.append(source)
        if in_skeleton[v]:
            main_preds[v] = [] if source is None else [source]
            main_succs.setdefault(v, [])
            if source is not None:
                main_succs.setdefault(source, []).append(v)
        for tensor in layer.outputs:
            producer[tensor.name] = v
    return main_preds, main_succs


class LabelTable:
    """Interns labels of both engines in one table, so equal labels get equal small integers."""

    def __init__(self) -> None:
        self._ids: dict[object, int] = {}

    def intern(self, key: object) -> int:
        return self._ids.setdefault(key, len(self._ids))


def own_labels(
    graph: EngineGraph, members: list[int], table: LabelTable, weights: bool, shapes: bool
) -> dict[int, int]:
    labels = {}
    for i in members:
        layer = graph.layers[i]
        key = (kind_class(layer), weight_count(layer) if weights else None,
               input_shape(layer) if shapes else None)
        labels[i] = table.intern(key)
    return labels


def coarse_labels(
    graph: EngineGraph, members: list[int], table: LabelTable, weights: bool
) -> dict[int, int]:
    """Kind class and weight count only: enough to confirm a pair a strong name proposes."""
    return {
        i: table.intern(("coarse", kind_class(graph.layers[i]),
                         weight_count(graph.layers[i]) if weights else None))
        for i in members
    }


def refine(
    labels: dict[int, int], sk: Skeleton, table: LabelTable, round_no: int
) -> dict[int, int]:
    """One Weisfeiler-Lehman round: a label plus the sorted labels of predecessors and successors."""
    return {
        i: table.intern((round_no, own, tuple(sorted(labels[p] for p in sk.preds[i])),
                         tuple(sorted(labels[s] for s in sk.succs[i]))))
        for i, own in labels.items()
    }


def shared_features(a: EngineGraph, b: EngineGraph) -> tuple[bool, bool]:
    """Whether both engines report weight counts, and whether both report tensor shapes."""
    def has_weights(g: EngineGraph) -> bool:
        return any(weight_count(layer) is not None for layer in g.layers)

    def has_shapes(g: EngineGraph) -> bool:
        return any(input_shape(layer) is not None for layer in g.layers)

    return has_weights(a) and has_weights(b), has_shapes(a) and has_shapes(b)
