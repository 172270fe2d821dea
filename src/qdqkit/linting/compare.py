"""Compare a predicted engine with a real ``trtexec --exportLayerInfo`` export (rule K1, K2).

Layers are matched by the engine tools' matcher (``qdqkit.engine.diff``). Disagreements are kept to
what the prediction claims: the count of Q/DQ Reformat layers, which convolutions write INT8, and
for matched layers whether input and output are quantized. FP16 against FP32 is not a
disagreement: under ``--best`` TensorRT picks between them by timing, which no static rule can.
"""

from __future__ import annotations

import os

from qdqkit.linting.result import Disagreement, EngineComparison
from qdqkit.trt.engine import EngineGraph, EngineLayer, LayerKind

_CONV_KINDS = (LayerKind.CONVOLUTION, LayerKind.DECONVOLUTION)


def int8_conv_outputs(engine: EngineGraph) -> int:
    return sum(
        1 for layer in engine.layers
        if layer.kind in _CONV_KINDS and layer.output_precision.is_quantized
    )


def _quantized_io(layer: EngineLayer) -> str:
    ins = "+".join("INT8" if t.precision.is_quantized else "float" for t in layer.inputs) or "-"
    outs = "+".join("INT8" if t.precision.is_quantized else "float" for t in layer.outputs) or "-"
    return f"{ins} -> {outs}"


def _layout_only(layer: EngineLayer) -> bool:
    return (layer.is_reformat and layer.origin != "QDQ") or layer.kind == LayerKind.NOOP


def compare_engines(predicted: EngineGraph, real: EngineGraph) -> EngineComparison:
    from qdqkit.trt.engine_matching import match_layers

    matching = match_layers(predicted, real)
    disagreements: list[Disagreement] = []
    counts = (
        ("Q/DQ Reformat layers", len(predicted.qdq_reformats()), len(real.qdq_reformats())),
        ("convolutions writing INT8", int8_conv_outputs(predicted), int8_conv_outputs(real)),
    )
    for subject, mine, theirs in counts:
        if mine != theirs:
            disagreements.append(Disagreement(subject, str(mine), str(theirs)))
    for i, j in matching.pairs:
        predicted_layer, real_layer = predicted.layers[i], real.layers[j]
        if _quantized_io(predicted_layer) != _quantized_io(real_layer):
            disagreements.append(Disagreement(
                f"layer '{real_layer.name}'", _quantized_io(predicted_layer),
                _quantized_io(real_layer)))
    for i in matching.only_a:
        layer = predicted.layers[i]
        if not _layout_only(layer):
            disagreements.append(Disagreement(f"layer '{layer.name}'", "present", "absent"))
    for j in matching.only_b:
        layer = real.layers[j]
        if not _layout_only(layer):
            disagreements.append(Disagreement(f"layer '{layer.name}'", "absent", "present"))
    return EngineComparison(
        real_engine=os.fspath(real.source),
        matched_layers=len(matching.pairs),
        predicted_qdq_reformats=len(predicted.qdq_reformats()),
        real_qdq_reformats=len(real.qdq_reformats()),
        predicted_int8_conv_outputs=int8_conv_outputs(predicted),
        real_int8_conv_outputs=int8_conv_outputs(real),
        disagreements=disagreements,
    )
