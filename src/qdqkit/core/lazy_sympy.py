"""Import onnx-ir without executing sympy until a symbolic-dimension expression is used.

onnx-ir 1.x imports sympy at the top of ``onnx_ir._core`` (about 0.26 s, more than half of
``qdqkit translate``'s imports) although only ``SymbolicDim`` arithmetic and parsing use it, and
its expression parser ``onnx_ir._symbolic_shapes`` reads ``sympy.Max`` and friends in its module
body. ``install()`` (called by ``import qdqkit``) adds a meta-path finder that acts on one import
only, the first import of ``onnx_ir`` in the process: while onnx-ir's package body runs, ``sympy``
and ``onnx_ir._symbolic_shapes`` are loaded through ``importlib.util.LazyLoader``, so their bodies
run at the first attribute access (``SymbolicDim("N") + 1`` works as before, it just pays for sympy
then). The finder then removes itself. Nothing happens when sympy or onnx-ir is already imported,
and any surprise (another onnx-ir layout, a loader without ``exec_module``) falls back to the
normal import: the worst case is the eager import onnx-ir does by itself.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

# Deferred only while onnx_ir's own package body runs: sympy, and the onnx-ir module whose body
# reads sympy's attributes.
DEFERRED = frozenset({"sympy", "onnx_ir._symbolic_shapes"})
TRIGGER = "onnx_ir"


def _real_spec(
    finder: object, name: str, path: Sequence[str] | None, target: ModuleType | None
) -> ModuleSpec | None:
    """The spec the rest of ``sys.meta_path`` gives for ``name``."""
    for other in list(sys.meta_path):
        find_spec = getattr(other, "find_spec", None)
        if other is finder or find_spec is None:
            continue
        spec = find_spec(name, path, target)
        if spec is not None:
            return spec
    return None


class _DeferSympy:
    """Meta-path finder: wraps onnx_ir's loader, then lazy-loads ``DEFERRED`` during its body."""

    def __init__(self) -> None:
        self.active = False

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name != TRIGGER and not (self.active and name in DEFERRED):
            return None
        try:
            spec = _real_spec(self, name, path, target)
            loader = None if spec is None else spec.loader
            if spec is None or loader is None or not hasattr(loader, "exec_module"):
                return None
            if name == TRIGGER:
                spec.loader = _ActivatingLoader(loader, self)  # type: ignore[assignment]
            else:
                from importlib.util import LazyLoader

                spec.loader = LazyLoader(loader)
            return spec
        except Exception:  # any surprise: the normal import
            self.remove()
            return None

    def remove(self) -> None:
        self.active = False
        if self in sys.meta_path:
            sys.meta_path.remove(self)


class _ActivatingLoader:
    """onnx_ir's own loader, with the deferral on while its package body runs."""

    def __init__(self, loader: Any, finder: _DeferSympy) -> None:
        self.loader = loader
        self.finder = finder

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # The module keeps its real loader (resources and reloads go through it).
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.finder.active = True
        try:
            self.loader.exec_module(module)
        finally:
            self.finder.remove()


def install() -> None:
    """Defer sympy for the first import of onnx-ir (a no-op if either is already imported)."""
    if TRIGGER in sys.modules or "sympy" in sys.modules:
        return
    if any(isinstance(finder, _DeferSympy) for finder in sys.meta_path):
        return
    sys.meta_path.insert(0, _DeferSympy())
