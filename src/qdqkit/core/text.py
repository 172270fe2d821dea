"""Wording shared by every report: counts with their nouns."""

from __future__ import annotations


def plural(n: int, noun: str) -> str:
    """``1 layer``, ``3 layers``: the count and the noun in the number it takes."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
