"""The TensorRT versions and targets qdqkit predicts for, and how a user's spelling maps to one.

1. ``8``, ``8.6``, ``8.6.1``, ``9`` (any 8.x or 9.x, with or without a ``trt`` prefix) -> ``8.6``:
   they treat Q/DQ alike.
2. ``10``, ``10.3``, ``trt10`` -> ``10``; ``11``, ``11.0``, ``TRT11`` -> ``11``.
3. Anything else is refused with the list of accepted versions.

Imports nothing heavy, so the command line checks ``--trt`` before any model is loaded.
"""

from __future__ import annotations

from qdqkit.core.errors import QdqkitError

TRT_VERSIONS = ("8.6", "10", "11")
TARGETS = ("gpu", "dla")


def normalize_trt_version(trt: str) -> str:
    text = str(trt).strip().lower().removeprefix("trt").strip()
    major = text.split(".")[0]
    if major in ("8", "9"):
        return "8.6"
    if major in ("10", "11"):
        return major
    raise QdqkitError(
        f"unknown TensorRT version '{trt}': use one of {', '.join(TRT_VERSIONS)}"
    )
