"""The four output files, in the reference translator's exact formats.

``<base>_noqdq.onnx``, ``<base>_precision_config.json`` (keys ``int8_tensor_scales`` then
``fp16_nodes``, 4-space indent, no trailing newline, strict JSON), ``<base>_precision_config_calib.cache``
and ``<base>_precision_config_layer_arg.txt`` (no trailing newline). All four are staged in one atomic
output set: they appear together or not at all, and never over the input model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import onnx_ir as ir

from qdqkit.core.atomic import output_set
from qdqkit.core.errors import OutputError
from qdqkit.core.model_io import stage_model
from qdqkit.trt.calib_cache import format_calib_cache
from qdqkit.trt.layer_args import format_layer_precisions

# Metadata key of the Q/DQ-free model: the SHA-256 of the Q/DQ file it was translated from.
SOURCE_KEY = "qdqkit.source_sha256"


@dataclass(frozen=True)
class OutputPaths:
    noqdq_model: Path
    precision_config: Path
    calib_cache: Path
    layer_arg: Path

    @classmethod
    def for_model(cls, output_dir: Path, base: str) -> OutputPaths:
        stem = Path(output_dir) / base
        return cls(
            noqdq_model=stem.with_name(f"{base}_noqdq.onnx"),
            precision_config=stem.with_name(f"{base}_precision_config.json"),
            calib_cache=stem.with_name(f"{base}_precision_config_calib.cache"),
            layer_arg=stem.with_name(f"{base}_precision_config_layer_arg.txt"),
        )

    def all(self) -> tuple[Path, ...]:
        return (self.noqdq_model, self.precision_config, self.calib_cache, self.layer_arg)


def format_precision_config(scales: Mapping[str, float], fp16_nodes: Sequence[str],
                            fp32_nodes: Sequence[str] = ()) -> str:
    """The JSON config; ``fp32_nodes`` (a mixed-precision source's float32 nodes) is a key of its
    own after the reference's two, present only when there are some."""
    for name, scale in scales.items():
        if not (math.isfinite(scale) and scale > 0):
            raise OutputError(f"tensor '{name}' would get scale {scale}; refusing to write it")
    document: dict[str, object] = {"int8_tensor_scales": dict(scales),
                                   "fp16_nodes": list(fp16_nodes)}
    if fp32_nodes:
        document["fp32_nodes"] = list(fp32_nodes)
    return json.dumps(document, indent=4, allow_nan=False)


def layer_precisions(fp16_nodes: Sequence[str], fp32_nodes: Sequence[str] = ()) -> str:
    """``--layerPrecisions``: the FP16 layers, then any float32 ones of a mixed-precision source."""
    parts = [format_layer_precisions(fp16_nodes), format_layer_precisions(fp32_nodes, "fp32")]
    return ",".join(part for part in parts if part)


def write_outputs(
    paths: OutputPaths,
    model: ir.Model,
    scales: Mapping[str, float],
    fp16_nodes: Sequence[str],
    calib_version: str,
    protected: tuple[Path, ...],
    *,
    fp32_nodes: Sequence[str] = (),
) -> None:
    config = format_precision_config(scales, fp16_nodes, fp32_nodes)
    cache = format_calib_cache(scales, calib_version)
    layer_arg = layer_precisions(fp16_nodes, fp32_nodes)
    with output_set(protected) as outputs:
        stage_model(outputs, model, paths.noqdq_model)
        outputs.stage_text(paths.precision_config, config)
        outputs.stage_text(paths.calib_cache, cache)
        outputs.stage_text(paths.layer_arg, layer_arg)
