"""Plain-text rendering: aligned tables and the number formats every command prints the same way."""

from __future__ import annotations

import math
from collections.abc import Sequence

_MAC_UNITS = (("G", 1e9), ("M", 1e6), ("k", 1e3))


def table(rows: Sequence[Sequence[object]], header: Sequence[str] | None = None) -> str:
    """A plain-text table with columns padded to their widest cell."""
    all_rows = [list(map(str, header))] if header else []
    all_rows += [[str(c) for c in row] for row in rows]
    if not all_rows:
        return ""
    widths = [max(len(r[i]) for r in all_rows if i < len(r)) for i in range(len(all_rows[0]))]
    lines = []
    for n, row in enumerate(all_rows):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip())
        if header and n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def milliseconds(value: float | None) -> str:
    """``1.234`` for a time in ms; ``-`` when it was not measured."""
    return "-" if value is None else f"{value:.3f}"


def decibels(value: float | None) -> str:
    """``31.4`` for an SNR in dB, ``inf``/``-inf``/``nan`` as they are; ``-`` when not measured."""
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.1f}"  # nan prints as nan


def share(value: float | None) -> str:
    """``38%`` for a fraction; ``-`` when it is unknown."""
    return "-" if value is None else f"{value:.0%}"


def macs(n: int | None) -> str:
    """``58.05 G`` for a multiply-accumulate count; ``?`` when shapes were unknown."""
    if n is None:
        return "?"
    for unit, size in _MAC_UNITS:
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return str(n)


def shorten(name: str, width: int) -> str:
    """Cut a long name to ``width`` characters in the middle (``...``), keeping more of its end:
    names of one engine share their start and differ at the end (``.../block7/conv2``)."""
    if len(name) <= width:
        return name
    head = (width - 3) // 3
    return name[:head] + "..." + name[len(name) - (width - 3 - head):]
