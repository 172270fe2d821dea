"""Short names that still tell layers apart.

Layer names of big engines share long prefixes (``StatefulPartitionedCall/model/``, ``/backbone/``)
and differ at the end (``stage3_block2_conv1/Conv2D``), or are fused lists whose first part (the
weight or main node) says which layer it is. So:

1. Path segments that most names of an engine start with are elided as ``…/``.
2. A fused name ``A + B + C`` shows ``A`` and then the last part, ``A … C``, when they fit.
3. What still does not fit is cut in the middle, keeping more of the end than of the start.
4. ``Reformatting CopyNode for Input Tensor 0 to X`` reads ``copy in0 → X``.
"""

from __future__ import annotations

import re
from collections import Counter

_ELLIPSIS = "…"
# TensorRT names the copies it inserts after the layer they feed or drain.
_COPY = re.compile(r"^Reformatting CopyNode for (Input|Output) Tensor (\d+) to (.+)$")


def cut_middle(text: str, width: int, ellipsis: str = _ELLIPSIS) -> str:
    """``text`` in at most ``width`` characters: a third from its start, the rest from its end."""
    if len(text) <= width:
        return text
    room = max(width - len(ellipsis), 2)
    head = room // 3
    return text[:head] + ellipsis + text[len(text) - (room - head):]


def common_prefix(names: list[str], share: float = 0.5) -> str:
    """The longest run of leading ``/``-separated segments shared by at least ``share`` of names
    (and by more than one name); ``""`` when there is none."""
    firsts = [n.split(" + ")[0] for n in names]
    prefix = ""
    while True:
        counts: Counter[str] = Counter()
        for name in firsts:
            if name.startswith(prefix):
                rest = name[len(prefix):]
                cut = rest.find("/", 1)
                if cut > 0:
                    counts[prefix + rest[:cut + 1]] += 1
        if not counts:
            return prefix
        candidate, count = counts.most_common(1)[0]
        if count < 2 or count < share * len(firsts):
            return prefix
        prefix = candidate


def display_name(name: str, width: int, prefix: str = "") -> str:
    copy = _COPY.match(name)
    if copy:
        lead = f"copy {'in' if copy.group(1) == 'Input' else 'out'}{copy.group(2)} → "
        return lead + display_name(copy.group(3), max(width - len(lead), 8), prefix)
    parts = [p.strip() for p in name.split(" + ") if p.strip()] or [name]

    def trim(part: str) -> str:
        if prefix and part.startswith(prefix) and len(part) > len(prefix):
            return _ELLIPSIS + "/" + part[len(prefix):]
        return part

    first = trim(parts[0])
    if len(parts) > 1:
        joined = f"{first} {_ELLIPSIS} {trim(parts[-1])}" if len(parts) > 2 else (
            f"{first} + {trim(parts[-1])}")
        if len(joined) <= width:
            return joined
        tag = f" +{len(parts) - 1}"
        return cut_middle(first, width - len(tag)) + tag
    return cut_middle(first, width)
