"""Input shapes as trtexec spells them: ``name:1x3x224x224,other:1x10``.

One reader for every command that takes ``--shapes`` (random inputs, MACs of dynamic models, the
latency model). It imports nothing heavy, so argument parsing stays instant.
"""

from __future__ import annotations

from collections.abc import Iterable

from qdqkit.core.errors import QdqkitError


def parse_shapes(texts: str | Iterable[str]) -> dict[str, tuple[int, ...]]:
    """``{input name: dims}`` from one spec or several (a repeated flag); errors name the entry."""
    shapes: dict[str, tuple[int, ...]] = {}
    for text in [texts] if isinstance(texts, str) else texts:
        for entry in filter(None, (part.strip() for part in text.split(","))):
            name, sep, dims = entry.rpartition(":")
            name = name.strip().strip("'\"")
            try:
                shape = tuple(int(d) for d in dims.lower().split("x"))
            except ValueError:
                shape = ()
            if not sep or not name or not shape or any(d < 1 for d in shape):
                raise QdqkitError(
                    f"--shapes entry {entry!r} is not 'input:DxDx...' with positive dimensions "
                    "(trtexec's spelling, e.g. images:1x3x640x640)"
                )
            if name in shapes:
                raise QdqkitError(f"--shapes gives input '{name}' twice")
            shapes[name] = shape
    return shapes
