"""FP32 pins on the TensorRT <= 10 build line: what FP16 cannot hold, outside the INT8 layers.

Truth: the TensorRT 11 output of the same model and data, whose FP16 remainder keeps those nodes
FP32 in the model itself (``passes.float16_remainder``); trtexec's documented spelling of
``--layerPrecisions`` / ``--layerOutputTypes`` (``name:type`` entries, comma-separated); and the
layers the engine predictor runs INT8.
"""

from __future__ import annotations

import shlex

import numpy as np
import onnx_ir as ir

from qdqkit.examples.graph import GraphBuilder
from qdqkit.quantization import quantize
from qdqkit.trt.layer_args import parse_layer_precisions
from tests.quantization.float_models import calibration_batches, svtr


def _flags(line: str) -> dict[str, str]:
    words = shlex.split(line)
    return dict(word[2:].split("=", 1) for word in words if word.startswith("--") and "=" in word)


def test_layernorm_sums_of_squares_are_pinned_fp32_as_trt11_keeps_them() -> None:
    g = svtr()
    data = calibration_batches(g, 4)
    weak = quantize(g.proto(), data, trt="10")
    strong = quantize(g.proto(), data, trt="11")
    assert weak.fp32_nodes and weak.fp32_nodes == strong.fp32_nodes
    assert {name.rstrip("0123456789") for name in weak.fp32_nodes} == {"pow", "reducemean"}
    flags = _flags(weak.trtexec)
    assert weak.trtexec.startswith("trtexec --onnx=model_int8.onnx --int8 --fp16 ")
    assert flags["precisionConstraints"] == "obey"
    pinned = parse_layer_precisions(flags["layerPrecisions"])
    assert pinned == dict.fromkeys(weak.fp32_nodes, "fp32")
    assert parse_layer_precisions(flags["layerOutputTypes"]) == pinned
    # Every pin names a node of the written model; the model itself stays float32.
    assert weak.model is not None
    names = {n.name for n in weak.model.graph}
    assert set(pinned) <= names
    assert not any(v.dtype == ir.DataType.FLOAT16 for n in weak.model.graph for v in n.outputs)
    assert weak.options["high_precision"] == "fp16" and weak.options["float_remainder"] == "fp32"


def _overflowing(name_muls: bool = True) -> GraphBuilder:
    """conv -> Mul(1e6) -> Mul(1e-6) -> conv: a tensor beyond 65504 between two convs (the
    factors vary over space, in form, so that they do not fold into the conv's weights)."""
    g = GraphBuilder("big", seed=1)
    x = g.input("x", [1, 16, 8, 8])
    y = g.conv(x, 16, 16, weight="float", name="c1")
    big = g.node("Mul", [y, g.const(np.full((1, 1, 8, 8), 1e6, np.float32))],
                 name="scale_up" if name_muls else "", out="big")
    small = g.node("Mul", [big, g.const(np.full((1, 1, 8, 8), 1e-6, np.float32))],
                   name="scale_down" if name_muls else "", out="small")
    g.conv(small, 16, 16, weight="float", name="c2")
    g.output(g.nodes[-1].output[0], [1, 16, 8, 8])
    return g


def test_a_range_beyond_fp16_is_pinned_only_outside_int8_layers() -> None:
    g = _overflowing()
    data = calibration_batches(g, 4)
    # Both convs INT8: the Muls fuse into c1's INT8 layer, whose epilogue TensorRT computes on
    # the FP32 accumulator and writes INT8; a precision constraint there would fight the Q/DQ.
    fused = quantize(g.proto(), data, trt="10")
    assert fused.fp32_nodes == {}
    assert fused.trtexec == "trtexec --onnx=model_int8.onnx --int8 --fp16"
    # Convs kept float: the layer is an --fp16 candidate, so the overflowing Muls are pinned.
    floating = quantize(g.proto(), data, trt="10", exclude=["Conv"], method="max")
    assert {"scale_up", "scale_down"} <= set(floating.fp32_nodes)
    assert "65504" in floating.fp32_nodes["scale_down"]
    pinned = parse_layer_precisions(_flags(floating.trtexec)["layerPrecisions"])
    assert {"scale_up", "scale_down"} <= set(pinned)


def test_unnamed_pinned_nodes_are_named_so_the_pin_finds_its_layer() -> None:
    g = _overflowing(name_muls=False)
    result = quantize(g.proto(), calibration_batches(g, 4), trt="10", exclude=["Conv"],
                      method="max")
    assert result.model is not None and result.fp32_nodes
    names = {n.name for n in result.model.graph}
    assert all(name and name in names for name in result.fp32_nodes)
    assert set(parse_layer_precisions(_flags(result.trtexec)["layerPrecisions"])) == set(
        result.fp32_nodes)


def test_high_precision_fp32_builds_without_fp16() -> None:
    g = svtr()
    result = quantize(g.proto(), calibration_batches(g, 2), trt="10", high_precision="fp32")
    assert result.trtexec == "trtexec --onnx=model_int8.onnx --int8"
    assert result.fp32_nodes == {}
    assert result.options["high_precision"] == "fp32"


def test_a_model_left_without_qdq_builds_without_int8_on_every_target() -> None:
    # Convs of 4 channels: no INT8 kernel beats FP16 (C20), so nothing is quantized. trtexec's
    # --int8 with neither Q/DQ nor a calibration cache would run INT8 on placeholder scales.
    g = GraphBuilder("thin", seed=2)
    x = g.input("x", [1, 4, 8, 8])
    y = g.conv(x, 4, 4, weight="float", name="c1")
    g.conv(y, 4, 4, weight="float", name="c2")
    g.output(g.nodes[-1].output[0], [1, 4, 8, 8])
    data = calibration_batches(g, 2)
    lines = {}
    for trt, target in (("10", "gpu"), ("11", "gpu"), ("10", "dla")):
        # DLA runs these convs INT8 (C20 is a GPU rule): there the user kept them float.
        exclude = ["Conv"] if target == "dla" else []
        result = quantize(g.proto(), data, trt=trt, target=target, method="max",
                          exclude=exclude)
        assert result.int8_ops == [] and not result.tensors
        assert any(w.startswith("nothing was quantized") for w in result.warnings)
        lines[trt, target] = result.trtexec
    assert lines["10", "gpu"] == "trtexec --onnx=model_int8.onnx --fp16"
    assert lines["11", "gpu"] == "trtexec --onnx=model_int8.onnx"
    assert lines["10", "dla"] == ("trtexec --onnx=model_int8.onnx --fp16 --useDLACore=0 "
                                  "--allowGPUFallback")
