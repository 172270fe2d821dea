"""Match the layers of two engines by the ONNX nodes they fused.

Rules, in order:

1. Layers with the same name on both sides (and unique on each) are the same layer.
2. Other layers are paired by the weighted overlap (Jaccard) of their fused ONNX node names, best
   pairs first, each layer used once. Auto-numbered names (``Conv_84``, ``(Unnamed Layer* 7)``)
   weigh little: two exports of one network number their nodes differently, so ``Conv_84`` may be
   a different convolution in each, while weight names and path-like names are stable. A pair
   that shares only auto-numbered names must also be of the same kind.
3. Layers still left whose names are equal once every number is masked (``GlobalAveragePool_246``
   and ``GlobalAveragePool_294``) and of the same kind are paired in order of execution, when both
   engines have the same count of them.
4. A layer left over whose ONNX nodes all lie inside one layer of the other engine was fused into
   it (e.g. a MaxPool that the other build folded into the convolution before it).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from qdqkit.trt.engine import EngineGraph, EngineLayer

_AUTO_NUMBERED = re.compile(r"^[A-Za-z]+_\d+$|Unnamed Layer\*")
_DIGITS = re.compile(r"\d+")
WEAK_WEIGHT = 0.2


def token_weight(node_name: str) -> float:
    return WEAK_WEIGHT if _AUTO_NUMBERED.search(node_name) else 1.0


@dataclass
class Matching:
    pairs: list[tuple[int, int]] = field(default_factory=list)  # (index in a, index in b)
    fused_into_b: dict[int, list[int]] = field(default_factory=dict)  # b layer <- a layers
    fused_into_a: dict[int, list[int]] = field(default_factory=dict)  # a layer <- b layers
    only_a: list[int] = field(default_factory=list)
    only_b: list[int] = field(default_factory=list)


def _unique_names(layers: list[EngineLayer]) -> dict[str, int]:
    seen: dict[str, int] = {}
    repeated = set()
    for i, layer in enumerate(layers):
        if layer.name in seen:
            repeated.add(layer.name)
        seen[layer.name] = i
    return {name: i for name, i in seen.items() if name not in repeated}


def _score(a: set[str], b: set[str]) -> tuple[float, bool]:
    shared = a & b
    union = sum(token_weight(t) for t in a | b)
    strong = any(token_weight(t) == 1.0 for t in shared)
    return (sum(token_weight(t) for t in shared) / union if union else 0.0), strong


def match_layers(a: EngineGraph, b: EngineGraph) -> Matching:
    result = Matching()
    free_a = set(range(len(a.layers)))
    free_b = set(range(len(b.layers)))
    names_b = _unique_names(b.layers)
    for name, i in _unique_names(a.layers).items():
        j = names_b.get(name)
        if j is not None:
            result.pairs.append((i, j))
            free_a.discard(i)
            free_b.discard(j)

    tokens_a = {i: set(a.layers[i].onnx_nodes) for i in free_a}
    tokens_b = {j: set(b.layers[j].onnx_nodes) for j in free_b}
    index_b: dict[str, list[int]] = defaultdict(list)
    for j in sorted(free_b):
        for token in tokens_b[j]:
            index_b[token].append(j)
    candidates: list[tuple[float, int, int]] = []
    for i in sorted(free_a):
        for j in sorted({j for t in tokens_a[i] for j in index_b.get(t, ())}):
            score, strong = _score(tokens_a[i], tokens_b[j])
            if strong or a.layers[i].kind == b.layers[j].kind:
                candidates.append((-score, i, j))
    for _neg_score, i, j in sorted(candidates):
        if i in free_a and j in free_b:
            result.pairs.append((i, j))
            free_a.discard(i)
            free_b.discard(j)

    _pair_by_masked_name(a, b, free_a, free_b, result.pairs)
    _fold_leftovers(free_a, tokens_a, b, result.fused_into_b)
    _fold_leftovers(free_b, tokens_b, a, result.fused_into_a)
    result.pairs.sort()
    result.only_a = sorted(free_a)
    result.only_b = sorted(free_b)
    return result


def _pair_by_masked_name(
    a: EngineGraph, b: EngineGraph, free_a: set[int], free_b: set[int],
    pairs: list[tuple[int, int]],
) -> None:
    def groups(graph: EngineGraph, free: set[int]) -> dict[tuple[str, str], list[int]]:
        found: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i in sorted(free):
            layer = graph.layers[i]
            found[(_DIGITS.sub("#", layer.name), layer.kind.value)].append(i)
        return found

    groups_b = groups(b, free_b)
    for key, members_a in groups(a, free_a).items():
        members_b = groups_b.get(key, [])
        if len(members_a) == len(members_b):
            for i, j in zip(members_a, members_b, strict=True):
                pairs.append((i, j))
                free_a.discard(i)
                free_b.discard(j)


def _fold_leftovers(
    free: set[int], tokens: dict[int, set[str]], other: EngineGraph, into: dict[int, list[int]]
) -> None:
    """Move each free layer whose nodes all sit in one layer of ``other`` into ``into``."""
    owner: dict[str, int] = {}
    for j, layer in enumerate(other.layers):
        for node in layer.onnx_nodes:
            owner.setdefault(node, j)
    for i in sorted(free):
        nodes = tokens.get(i) or set()
        owners = {owner.get(n, -1) for n in nodes}
        if nodes and len(owners) == 1 and -1 not in owners:
            (j,) = owners
            into.setdefault(j, []).append(i)
            free.discard(i)
