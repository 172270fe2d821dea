"""The ONNX node names inside an engine layer's name, and which of them can be trusted.

1. TensorRT joins the nodes a layer fused with `` + `` and wraps pointwise fusions as
   ``PWN(Clip_550)`` or ``PWN(PWN(Sigmoid_3), Mul_4)``; the wrapper is not a node, its contents are.
2. Auto-numbered names (``Conv_84``, ``QuantizeLinear_439``, tf2onnx's ``Conv__435``,
   ``(Unnamed Layer* 7) [Shuffle]``) are numbered per export: the same name may be a different node
   in another export of one network, so they are weak evidence. Path-like and weight names
   (``layer2.0.conv2.weight``) are strong.
3. One export may rename every scope of another: TensorFlow's QAT wrappers turn
   ``resnet50/conv2_block1_1_conv/Conv2D`` into ``resnet50/quant_conv2_block1_1_conv/Conv2D``.
   Two engines' names are compared as their words (split at ``/ _ . : -``) without the words
   one engine writes in many names (a quarter or more) and the other in none: a renaming applied
   throughout, not a word naming one node that the other network lacks.
"""

from __future__ import annotations

import re

_AUTO_NUMBERED = re.compile(r"^[A-Za-z]+_+\d+$|Unnamed Layer\*")
_WRAPPER = "PWN("


def _split_top_level(text: str) -> list[str]:
    """Split at commas outside parentheses (node names may contain ``(Unnamed Layer* 3)``)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def unwrap_node_name(part: str) -> list[str]:
    """``PWN(PWN(Sigmoid_3), Mul_4)`` -> ``["Sigmoid_3", "Mul_4"]``; other names stay as they are."""
    part = part.strip()
    if part.startswith(_WRAPPER) and part.endswith(")"):
        inner = _split_top_level(part[len(_WRAPPER):-1])
        return [name for piece in inner for name in unwrap_node_name(piece)]
    return [part] if part else []


def unwrap_node_names(parts: list[str]) -> list[str]:
    """Every node name of ``parts`` with pointwise wrappers removed, in order, without repeats."""
    return list(dict.fromkeys(name for part in parts for name in unwrap_node_name(part)))


_WORD_SPLIT = re.compile(r"[/_.:\-\s]+")
# Rule 3: a word missing from the other engine is an export's renaming when this many of this
# engine's names carry it.
_RENAMING_SHARE = 0.25


def _words(name: str) -> list[str]:
    return [w for w in _WORD_SPLIT.split(name) if w]


def _renaming_words(names: list[str], other_vocabulary: set[str]) -> set[str]:
    """Words of ``names`` absent from the other engine and in a quarter or more of ``names``."""
    held: dict[str, int] = {}
    for name in names:
        for word in set(_words(name)):
            if word not in other_vocabulary:
                held[word] = held.get(word, 0) + 1
    least = _RENAMING_SHARE * len(names)
    return {word for word, count in held.items() if count >= least}


def comparable_names(names_a: list[str], names_b: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Rule 3: each distinct name of two engines -> the form it is compared in (its words
    joined by ``/``, less the renaming words of its engine)."""
    unique_a, unique_b = list(dict.fromkeys(names_a)), list(dict.fromkeys(names_b))
    vocabulary_a = {w for name in unique_a for w in _words(name)}
    vocabulary_b = {w for name in unique_b for w in _words(name)}
    drop_a = _renaming_words(unique_a, vocabulary_b)
    drop_b = _renaming_words(unique_b, vocabulary_a)

    def compared(name: str, drop: set[str]) -> str:
        return "/".join(w for w in _words(name) if w not in drop)

    return ({n: compared(n, drop_a) for n in unique_a}, {n: compared(n, drop_b) for n in unique_b})


def is_auto_numbered(node_name: str) -> bool:
    return bool(_AUTO_NUMBERED.search(node_name))
