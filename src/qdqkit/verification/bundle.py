"""Finding the translated bundle beside a Q/DQ model and checking its two scale files agree."""

from __future__ import annotations

import json
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


def precision_config_matches_cache(paths: OutputPaths, cache_scales: dict[str, float]) -> bool:
    """Whether the precision config holds the cache's scales, in its order, bit for bit."""
    if not paths.precision_config.is_file():
        return False
    try:
        config = json.loads(paths.precision_config.read_text(encoding="utf-8"))
        scales = config["int8_tensor_scales"]
    except (ValueError, KeyError, TypeError):
        return False
    return list(scales) == list(cache_scales) and all(
        scale_to_hex(float(scales[k])) == scale_to_hex(v) for k, v in cache_scales.items()
    )
