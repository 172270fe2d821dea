"""Match the layers of two engines by structure, with names as evidence.

Two builds or exports of one network may name every layer differently (TensorFlow's QAT export
renames them all; auto-numbered names like ``QuantizeLinear_439`` mean different nodes in different
exports), so the arithmetic layers (the *skeleton*, see ``layer_signature``) are paired first by
what they compute and where they sit, then the data-movement layers around them:

1. Structure: a refined label (kind class, weight count, input shape, and the labels of the
   neighbours k steps out) that is unique in both engines pairs its two layers, most specific first,
   unless a strong (non auto-numbered) ONNX node name of one layer sits on another layer of the
   other engine with the same kind class and weight count.
2. Names: layers sharing a strong ONNX node name found once in each engine, with the same kind
   class and weight count (shapes may differ: one build reads a flattened tensor). Names are
   compared without a renaming one export applies throughout (``onnx_names`` rule 3: Keras QAT's
   ``quant_`` scopes), in this step and in step 1's check.
3. Neighbours: from each pair, unpaired predecessors (and successors) with an own label that occurs
   once on each side are paired, and so on outwards; first along first-input links (what a layer
   computes from survives a residual Add fused into another layer), then along every link.
4. Order: layers left between the same two pairs, with the same own label, are paired in execution
   order when both sides have as many.
5. Last, a layer still unpaired next to a pair, alone there on both sides with its kind class
   and weight count, pairs even when its input shape differs (one build padded the input of the
   first convolution in a layer of its own, the other inside the convolution).
6. Data movement (Reformats, NoOps, Shuffles): by kind class, origin and the pairs of the skeleton
   layers before and after them; several in one place pair in order, or by equal name.
7. A layer left over whose ONNX nodes all lie inside one layer of the other engine, or whose only
   skeleton predecessor's partner writes the same output shape as it does, was fused into it (e.g.
   a MaxPool that the other build folded into the convolution before it).

Every step is linear in the layers and links (hash tables, no all-pairs comparison).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from qdqkit.trt.engine import EngineGraph
from qdqkit.trt.layer_signature import (
    MAX_ROUNDS,
    LabelTable,
    Skeleton,
    coarse_labels,
    kind_class,
    own_labels,
    refine,
    shared_features,
    skeleton,
    strong_names,
)
from qdqkit.trt.onnx_names import comparable_names, unwrap_node_names


@dataclass
class Matching:
    pairs: list[tuple[int, int]] = field(default_factory=list)  # (index in a, index in b)
    fused_into_b: dict[int, list[int]] = field(default_factory=dict)  # b layer <- a layers
    fused_into_a: dict[int, list[int]] = field(default_factory=dict)  # a layer <- b layers
    only_a: list[int] = field(default_factory=list)
    only_b: list[int] = field(default_factory=list)


class _Pairing:
    """The pairs found so far, in both directions."""

    def __init__(self) -> None:
        self.a_to_b: dict[int, int] = {}
        self.b_to_a: dict[int, int] = {}

    def add(self, i: int, j: int) -> bool:
        if i in self.a_to_b or j in self.b_to_a:
            return False
        self.a_to_b[i] = j
        self.b_to_a[j] = i
        return True


def _unique(labels: dict[int, int]) -> dict[int, int]:
    """label -> layer, for labels carried by exactly one layer."""
    counts = Counter(labels.values())
    return {label: i for i, label in labels.items() if counts[label] == 1}


def _strong_owner(strong: dict[int, list[str]]) -> dict[str, int]:
    """Strong node name -> the one skeleton layer holding it (names held twice are dropped)."""
    owner: dict[str, int] = {}
    repeated: set[str] = set()
    for i, names in strong.items():
        for name in names:
            if name in owner and owner[name] != i:
                repeated.add(name)
            owner[name] = i
    return {name: i for name, i in owner.items() if name not in repeated}


class _SkeletonMatcher:
    def __init__(self, a: EngineGraph, b: EngineGraph, pairing: _Pairing) -> None:
        self.a, self.b, self.pairing = a, b, pairing
        self.sk_a, self.sk_b = skeleton(a), skeleton(b)
        weights, shapes = shared_features(a, b)
        table = LabelTable()
        self.own_a = own_labels(a, self.sk_a.members, table, weights, shapes)
        self.own_b = own_labels(b, self.sk_b.members, table, weights, shapes)
        self.coarse_a = coarse_labels(a, self.sk_a.members, table, weights)
        self.coarse_b = coarse_labels(b, self.sk_b.members, table, weights)
        strong_a = {i: strong_names(a.layers[i]) for i in self.sk_a.members}
        strong_b = {j: strong_names(b.layers[j]) for j in self.sk_b.members}
        as_a, as_b = comparable_names([n for names in strong_a.values() for n in names],
                                      [n for names in strong_b.values() for n in names])
        self.strong_a = {i: list(dict.fromkeys(as_a[n] for n in names if as_a[n]))
                         for i, names in strong_a.items()}
        self.strong_b = {j: list(dict.fromkeys(as_b[n] for n in names if as_b[n]))
                         for j, names in strong_b.items()}
        self.names_a = _strong_owner(self.strong_a)
        self.names_b = _strong_owner(self.strong_b)
        self.rounds = [(self.own_a, self.own_b)]
        distinct = len(set(self.own_a.values()) | set(self.own_b.values()))
        for round_no in range(1, MAX_ROUNDS + 1):
            prev_a, prev_b = self.rounds[-1]
            next_a = refine(prev_a, self.sk_a, table, round_no)
            next_b = refine(prev_b, self.sk_b, table, round_no)
            self.rounds.append((next_a, next_b))
            refined = len(set(next_a.values()) | set(next_b.values()))
            if refined == distinct:  # the partition stopped getting finer
                break
            distinct = refined

    def _names_disagree(self, i: int, j: int) -> bool:
        """A strong name of ``i`` (or ``j``) sits on a different, like-labelled layer opposite."""
        for name in self.strong_a[i]:
            other = self.names_b.get(name)
            if other is not None and other != j and self.coarse_b[other] == self.coarse_a[i]:
                return True
        for name in self.strong_b[j]:
            other = self.names_a.get(name)
            if other is not None and other != i and self.coarse_a[other] == self.coarse_b[j]:
                return True
        return False

    def by_structure(self) -> None:
        for labels_a, labels_b in reversed(self.rounds):
            unique_b = _unique(labels_b)
            for label, i in sorted(_unique(labels_a).items(), key=lambda kv: kv[1]):
                j = unique_b.get(label)
                if j is not None and not self._names_disagree(i, j):
                    self.pairing.add(i, j)

    def by_names(self) -> None:
        shared: Counter[tuple[int, int]] = Counter()
        for name, i in self.names_a.items():
            j = self.names_b.get(name)
            if j is not None and self.coarse_a[i] == self.coarse_b[j]:
                shared[(i, j)] += 1
        for (i, j), _count in sorted(shared.items(), key=lambda kv: (-kv[1], kv[0])):
            self.pairing.add(i, j)

    def by_neighbours(self, *, coarse: bool = False) -> None:
        """Step 3 with own labels; with ``coarse``, step 5: kind class and weight count only."""
        labels_a, labels_b = (self.coarse_a, self.coarse_b) if coarse else (self.own_a, self.own_b)
        # Main (first-input) links first: they survive a residual Add fused elsewhere.
        main = ((self.sk_a.main_preds, self.sk_b.main_preds),
                (self.sk_a.main_succs, self.sk_b.main_succs))
        every = ((self.sk_a.preds, self.sk_b.preds), (self.sk_a.succs, self.sk_b.succs))
        for links in (main, every):
            queue = sorted(self.pairing.a_to_b.items())
            while queue:
                i, j = queue.pop()
                for near_a, near_b in links:
                    for pair in self._lone_label_pairs(near_a.get(i, []), near_b.get(j, []),
                                                       labels_a, labels_b):
                        if self.pairing.add(*pair):
                            queue.append(pair)

    def _lone_label_pairs(self, near_a: list[int], near_b: list[int], labels_a: dict[int, int],
                          labels_b: dict[int, int]) -> list[tuple[int, int]]:
        free_a = [i for i in near_a if i not in self.pairing.a_to_b]
        free_b = [j for j in near_b if j not in self.pairing.b_to_a]
        if not free_a or not free_b:
            return []
        unique_b = _unique({j: labels_b[j] for j in free_b})
        unique_a = _unique({i: labels_a[i] for i in free_a})
        return [(i, unique_b[label]) for label, i in unique_a.items() if label in unique_b]

    def by_order(self) -> None:
        def gaps(members: list[int], own: dict[int, int], paired: dict[int, int],
                 to_a: dict[int, int] | None) -> dict[tuple[int, int], list[int]]:
            found: dict[tuple[int, int], list[int]] = defaultdict(list)
            last = -1  # the last paired layer, named by its index in A
            for i in members:
                if i in paired:
                    last = i if to_a is None else to_a[i]
                else:
                    found[(last, own[i])].append(i)
            return found

        gaps_b = gaps(self.sk_b.members, self.own_b, self.pairing.b_to_a, self.pairing.b_to_a)
        gaps_a = gaps(self.sk_a.members, self.own_a, self.pairing.a_to_b, None)
        for key, members_a in gaps_a.items():
            members_b = gaps_b.get(key, [])
            if len(members_a) == len(members_b):
                for i, j in zip(members_a, members_b, strict=True):
                    self.pairing.add(i, j)

    def run(self) -> None:
        self.by_structure()
        self.by_names()
        self.by_neighbours()
        self.by_order()
        self.by_neighbours()
        self.by_neighbours(coarse=True)


def _movement_key(
    sk: Skeleton, i: int, graph: EngineGraph, to_other: dict[int, int] | None
) -> tuple[object, ...]:
    def mapped(layers: frozenset[int]) -> frozenset[int]:
        if to_other is None:
            return layers
        return frozenset(to_other.get(u, -1 - u) for u in layers)  # unpaired: never equal

    layer = graph.layers[i]
    return (kind_class(layer), layer.origin, mapped(sk.before[i]), mapped(sk.after[i]))


def _pair_data_movement(
    a: EngineGraph, b: EngineGraph, sk_a: Skeleton, sk_b: Skeleton, pairing: _Pairing
) -> None:
    in_a, in_b = set(sk_a.members), set(sk_b.members)
    groups_b: dict[tuple[object, ...], list[int]] = defaultdict(list)
    for j in range(len(b.layers)):
        if j not in in_b:
            # B's neighbours are named by their partners in A, so keys compare directly.
            groups_b[_movement_key(sk_b, j, b, pairing.b_to_a)].append(j)
    groups_a: dict[tuple[object, ...], list[int]] = defaultdict(list)
    for i in range(len(a.layers)):
        if i not in in_a:
            groups_a[_movement_key(sk_a, i, a, None)].append(i)
    for key, members_a in groups_a.items():
        members_b = groups_b.get(key, [])
        if len(members_a) == len(members_b):
            for i, j in zip(members_a, members_b, strict=True):
                pairing.add(i, j)
            continue
        by_name = {b.layers[j].name: j for j in members_b}
        for i in members_a:
            j_named = by_name.get(a.layers[i].name)
            if j_named is not None:
                pairing.add(i, j_named)


def _fold_leftovers(
    graph: EngineGraph, sk: Skeleton, other: EngineGraph, to_other: dict[int, int],
    free: list[int], into: dict[int, list[int]],
) -> list[int]:
    """Layers of ``free`` fused into one layer of ``other``; returns those still left."""
    owner: dict[str, int] = {}
    for j, layer in enumerate(other.layers):
        for node in unwrap_node_names(layer.onnx_nodes):
            owner.setdefault(node, j)
    left = []
    for i in free:
        layer = graph.layers[i]
        nodes = unwrap_node_names(layer.onnx_nodes)
        owners = {owner.get(n, -1) for n in nodes}
        # Partners of the skeleton layers next to it: where a fusion can have put it.
        beside = {to_other[u] for u in sk.before[i] | sk.after[i] if u in to_other}
        host: int | None = None
        if len(owners) == 1 and -1 not in owners:
            (named,) = owners
            # Auto-numbered names alone may mean another node there: the host must be adjacent.
            if strong_names(layer) or named in beside:
                host = named
        if host is None:
            host = _absorbed_by(graph, sk, other, to_other, i)
        if host is None:
            left.append(i)
        else:
            into.setdefault(host, []).append(i)
    return left


def _absorbed_by(
    graph: EngineGraph, sk: Skeleton, other: EngineGraph, to_other: dict[int, int], i: int
) -> int | None:
    """The partner of ``i``'s only predecessor, when that partner writes ``i``'s output shape
    and the predecessor does not (the other build computed both in one layer)."""
    preds = sk.preds.get(i, [])
    if len(preds) != 1 or preds[0] not in to_other:
        return None
    host = to_other[preds[0]]
    mine = graph.layers[i].outputs
    theirs = other.layers[host].outputs
    pred_out = graph.layers[preds[0]].outputs
    if not (mine and theirs and pred_out) or mine[0].shape is None:
        return None
    if theirs[0].shape == mine[0].shape and pred_out[0].shape != mine[0].shape:
        return host
    return None


def match_layers(a: EngineGraph, b: EngineGraph) -> Matching:
    pairing = _Pairing()
    matcher = _SkeletonMatcher(a, b, pairing)
    matcher.run()
    _pair_data_movement(a, b, matcher.sk_a, matcher.sk_b, pairing)
    result = Matching(pairs=sorted(pairing.a_to_b.items()))
    free_a = [i for i in range(len(a.layers)) if i not in pairing.a_to_b]
    free_b = [j for j in range(len(b.layers)) if j not in pairing.b_to_a]
    result.only_a = _fold_leftovers(a, matcher.sk_a, b, pairing.a_to_b, free_a,
                                    result.fused_into_b)
    result.only_b = _fold_leftovers(b, matcher.sk_b, a, pairing.b_to_a, free_b,
                                    result.fused_into_a)
    return result
