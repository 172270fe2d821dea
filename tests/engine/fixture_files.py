"""The ResNet-18 engine exports, and an independent reading of them for expected values.

Expected numbers in the engine tests come from ``raw_*`` here: plain ``json`` and string checks
written for the tests, never qdqkit's reader, so a reader bug cannot hide behind itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "trex-resnet18-a100"
STEMS = {
    "fp32": "resnet",
    "fp16": "resnet",
    "qat": "resnet-qat",
    "qat-residual": "resnet-qat-residual",
    "qat-residual-qgap": "resnet-qat-residual-qgap",
}
CONSTRUCTED = ROOT / "constructed"


def graph_path(variant: str) -> Path:
    return ROOT / variant / f"{STEMS[variant]}.onnx.engine.graph.json"


def profile_path(variant: str) -> Path:
    return ROOT / variant / f"{STEMS[variant]}.onnx.engine.profile.json"


def raw_graph(variant: str) -> dict[str, Any]:
    return json.loads(graph_path(variant).read_text())


def raw_profile(variant: str) -> list[dict[str, Any]]:
    return json.loads(profile_path(variant).read_text())


def raw_end_to_end_median(variant: str) -> float:
    meta = ROOT / variant / f"{STEMS[variant]}.onnx.engine.profile.metadata.json"
    # trtexec's summary lists min, max, mean, median, percentile.
    return float(json.loads(meta.read_text())["performance_summary"]["Latency"][3])


def raw_precision(format_datatype: str) -> str:
    """The element type in a TensorRT 8.x ``Format/Datatype`` string, read by the test."""
    for word, name in (("Int8", "INT8"), ("FP16", "FP16"), ("FP32", "FP32")):
        if word in format_datatype:
            return name
    raise AssertionError(f"unexpected format string in the fixture: {format_datatype}")


def raw_signature(layer: dict[str, Any]) -> str:
    ins = list(dict.fromkeys(raw_precision(t["Format/Datatype"]) for t in layer["Inputs"]))
    outs = list(dict.fromkeys(raw_precision(t["Format/Datatype"]) for t in layer["Outputs"]))
    if ins == outs and len(ins) == 1:
        return ins[0]
    return f"{'+'.join(ins)} → {'+'.join(outs)}"


def raw_is_compute(layer: dict[str, Any]) -> bool:
    return layer["LayerType"] not in ("Reformat", "NoOp")


def raw_kind(layer: dict[str, Any]) -> str:
    return {
        "CaskConvolution": "Convolution", "ConvActPool": "Convolution",
        "TiledPooling": "Pooling", "CudaPooling": "Pooling", "CaskPooling": "Pooling",
        "Reformat": "Reformat", "NoOp": "NoOp",
    }[layer["LayerType"]]


def weight_key(name: str) -> str | None:
    """The convolution weight a fused layer name starts with: stable across the QAT exports."""
    first = name.split(" + ")[0]
    return first if first.endswith(".weight") else None


# NVIDIA's trt-engine-explorer test and notebook exports (tests/fixtures/NOTICE.md): MobileNet-v2
# QAT built twice (TensorRT 8.x, detailed), and a names-only detector export with Myelin layers.
MOBILENET = Path(__file__).resolve().parent.parent / "fixtures" / "trex-mobilenet"
MOBILENET_STEMS = {"plain": "mobilenet.qat", "residuals": "mobilenet_v2_residuals.qat"}
NAMES_ONLY_GRAPH = MOBILENET / "names-only" / "layer_info.json"
NAMES_ONLY_PROFILE = MOBILENET / "names-only" / "profile.json"


def mobilenet_graph(variant: str) -> Path:
    return MOBILENET / f"{MOBILENET_STEMS[variant]}.onnx.engine.graph.json"


def mobilenet_profile(variant: str) -> Path:
    return MOBILENET / f"{MOBILENET_STEMS[variant]}.onnx.engine.profile.json"


def raw_layer_names(graph: Path) -> list[str]:
    """Layer names of a detailed (objects) or names-only (strings) export."""
    layers = json.loads(graph.read_text())["Layers"]
    return [layer if isinstance(layer, str) else layer["Name"] for layer in layers]


def raw_records(profile: Path) -> list[dict[str, Any]]:
    """The per-layer records of an --exportProfile file (the run-count header left out)."""
    return [r for r in json.loads(profile.read_text()) if "name" in r]
