"""The ONNX node names inside an engine layer's name, and which of them can be trusted.

1. TensorRT joins the nodes a layer fused with `` + `` and wraps pointwise fusions as
   ``PWN(Clip_550)`` or ``PWN(PWN(Sigmoid_3), Mul_4)``; the wrapper is not a node, its contents are.
2. Auto-numbered names (``Conv_84``, ``QuantizeLinear_439``, ``(Unnamed Layer* 7) [Shuffle]``) are
   numbered per export: the same name may be a different node in another export of one network, so
   they are weak evidence. Path-like and weight names (``layer2.0.conv2.weight``) are strong.
"""

from __future__ import annotations

import re

_AUTO_NUMBERED = re.compile(r"^[A-Za-z]+_\d+$|Unnamed Layer\*")
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


def is_auto_numbered(node_name: str) -> bool:
    return bool(_AUTO_NUMBERED.search(node_name))
