"""The translated bundle beside a Q/DQ model: finding it, and checking it belongs to that model.

``translate`` records the SHA-256 of the Q/DQ file it read in the Q/DQ-free model's metadata
(``SOURCE_KEY``); verify refuses a bundle whose record names other bytes, and says so when a bundle
(an older one, or NVIDIA's translator's) carries no record. Cache scales must be finite and
positive: anything else is refused before it could turn into a meaningless figure.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from qdqkit.core.errors import QdqkitError
from qdqkit.translation.writer import OutputPaths
from qdqkit.trt.calib_cache import scale_to_hex


def find_bundle(qdq_model: Path, translated_dir: Path) -> OutputPaths:
    """The four files ``translate`` wrote for ``qdq_model`` in ``translated_dir``."""
    paths = OutputPaths.for_model(translated_dir, qdq_model.stem)
    if not paths.noqdq_model.is_file():
        found = sorted(translated_dir.glob("*_noqdq.onnx")) if translated_dir.is_dir() else []
        if len(found) == 1:
            paths = OutputPaths.for_model(translated_dir, found[0].name[: -len("_noqdq.onnx")])
        else:
            raise QdqkitError(
                f"{translated_dir}: no {paths.noqdq_model.name}; give the folder "
                f"'qdqkit translate -i {qdq_model} -o DIR' wrote"
            )
    if not paths.calib_cache.is_file():
        raise QdqkitError(f"{paths.calib_cache}: missing; translate the model again")
    return paths


def check_source(
    recorded: str | None, digest: str | None, qdq_model: Path, noqdq_model: Path
) -> bool:
    """Whether the bundle records its source; raise if it records another model.

    ``digest`` is the Q/DQ file's SHA-256 (``core.model_io.file_sha256``), needed only when the
    bundle records one.
    """
    if recorded is None:
        return False
    if recorded != digest:
        raise QdqkitError(
            f"{noqdq_model}: was translated from another model than {qdq_model} (its recorded "
            f"SHA-256 {recorded[:12]}... differs); translate {qdq_model} again or give its own folder"
        )
    return True


def check_cache_scales(scales: dict[str, float], cache_path: Path) -> None:
    if not scales:
        raise QdqkitError(f"{cache_path}: holds no scales; translate the model again")
    for name, scale in scales.items():
        if not (math.isfinite(scale) and scale > 0):
            raise QdqkitError(
                f"{cache_path}: tensor '{name}' has scale {scale}; a scale must be finite and "
                "positive (TensorRT would build garbage from it); translate the model again"
            )


def precision_config_matches_cache(paths: OutputPaths, cache_scales: dict[str, float]) -> bool:
    """Whether the precision config holds the cache's scales, in its order, bit for bit."""
    if not paths.precision_config.is_file():
        return False
    try:
        config = json.loads(paths.precision_config.read_text(encoding="utf-8"))
        scales = config["int8_tensor_scales"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return False
    if not isinstance(scales, dict):
        return False
    try:
        return list(scales) == list(cache_scales) and all(
            scale_to_hex(float(scales[k])) == scale_to_hex(v) for k, v in cache_scales.items()
        )
    except (TypeError, ValueError, OverflowError):
        return False
