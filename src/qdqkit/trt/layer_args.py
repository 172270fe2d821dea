"""The ``--layerPrecisions`` argument trtexec takes: ``name:fp16,name2:fp16`` (ONNX node names).

Written without a trailing newline so ``--layerPrecisions=$(cat file)`` works; entries are unique and
never empty (an empty name would make trtexec match nothing, or everything with a wildcard).
"""

from __future__ import annotations

from collections.abc import Iterable

from qdqkit.core.errors import QdqkitError


def format_layer_precisions(nodes: Iterable[str], precision: str = "fp16") -> str:
    seen: dict[str, None] = {}
    for name in nodes:
        if not name:
            raise QdqkitError("a layer-precision entry has an empty node name; name every node")
        if "," in name:
            raise QdqkitError(
                f"node name '{name}' contains a comma, which --layerPrecisions cannot express"
            )
        seen.setdefault(name, None)
    return ",".join(f"{name}:{precision}" for name in seen)


def parse_layer_precisions(text: str) -> dict[str, str]:
    """``name:prec,...`` -> {name: prec}; later entries override earlier ones, as in trtexec."""
    result: dict[str, str] = {}
    for entry in text.strip().split(","):
        if not entry:
            continue
        name, sep, precision = entry.rpartition(":")
        if not sep:
            raise QdqkitError(f"layer-precision entry {entry!r} is not 'name:precision'")
        result[name] = precision
    return result


def trtexec_command(
    onnx_path: str, calib_cache: str, layer_precisions: str, *, dla_core: int | None = None
) -> str:
    """The trtexec build line a translated bundle is meant for (TensorRT <= 10, implicit INT8)."""
    parts = ["trtexec", f"--onnx={onnx_path}", f"--calib={calib_cache}", "--int8", "--fp16"]
    if layer_precisions:
        parts += ["--precisionConstraints=prefer", f"--layerPrecisions={layer_precisions}"]
    if dla_core is not None:
        parts += [f"--useDLACore={dla_core}", "--allowGPUFallback"]
    return " ".join(parts)
