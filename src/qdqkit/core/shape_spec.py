"""Input shapes as trtexec spells them: ``name:1x3x224x224,other:1x10``.

One reader for every command that takes ``--shapes`` (random inputs, MACs of dynamic models, the
latency model). It imports nothing heavy, so argument parsing stays instant.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

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


def check_shapes(inputs: Mapping[str, Sequence[int | None] | None],
                 shapes: Mapping[str, Sequence[int]], where: str = "",
                 require_dynamic: bool = False) -> None:
    """Given ``shapes`` must fit the model's ``inputs`` (name -> dims, None for a symbolic one or
    an unknown rank): known names, the rank, the dimensions the model fixes. With
    ``require_dynamic``, every input with a symbolic dimension must be given (the engine is
    judged at these shapes alone)."""
    prefix = f"{where}: " if where else ""
    unknown = [name for name in shapes if name not in inputs]
    if unknown:
        raise QdqkitError(f"{prefix}--shapes names '{unknown[0]}', which is not an input of the "
                          f"model (its inputs: {', '.join(inputs) or 'none'})")
    if require_dynamic:
        missing = [name for name, dims in inputs.items()
                   if name not in shapes and (dims is None or None in dims)]
        if missing:
            raise QdqkitError(f"{prefix}--shapes leaves out {', '.join(map(repr, missing))}, "
                              "whose dimensions are dynamic too: give the deployed shape of "
                              "every such input")
    for name, dims in shapes.items():
        model_dims = inputs[name]
        if model_dims is None:
            continue
        given = "x".join(str(d) for d in dims)
        if len(dims) != len(model_dims):
            raise QdqkitError(f"{prefix}input '{name}' has {len(model_dims)} dimensions; "
                              f"--shapes gives {len(dims)} ({given})")
        for axis, (fixed, value) in enumerate(zip(model_dims, dims, strict=True)):
            if fixed is not None and fixed != value:
                raise QdqkitError(f"{prefix}input '{name}' axis {axis} is fixed at {fixed}; "
                                  f"--shapes gives {given}")


def declared_dims(inputs: Iterable[Any]) -> dict[str, list[int | None] | None]:
    """``check_shapes``'s view of graph inputs (onnx-ir values): each one's dims, a symbolic
    or negative one (Paddle's -1) as None; None for an input without a shape."""
    return {value.name or "": None if value.shape is None else
            [d if isinstance(d, int) and d > 0 else None for d in value.shape]
            for value in inputs}
