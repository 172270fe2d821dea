"""The engine predictor against real TensorRT engines and against the rule base."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from qdqkit.core.errors import QdqkitError
from qdqkit.examples.graph import GraphBuilder
from qdqkit.examples.resnet import VARIANTS, resnet18_qdq
from qdqkit.trt.engine import EngineGraph, LayerKind, Precision
from qdqkit.trt.engine_json import read_engine_graph
from qdqkit.trt.predict import predict_engine
from tests.models import every_node_is_accounted_for

TREX = Path(__file__).resolve().parents[1] / "fixtures" / "trex-resnet18-a100"


def real_engine(variant: str) -> EngineGraph:
    return read_engine_graph(TREX / variant / f"resnet-{variant}.onnx.engine.graph.json")


@pytest.fixture(scope="module")
def resnets() -> dict[str, onnx.ModelProto]:
    return {variant: resnet18_qdq(variant) for variant in VARIANTS}


def _containing(engine: EngineGraph, op_prefix: str) -> list[bool]:
    """For each layer fusing a node named ``op_prefix``_N: does it write INT8?"""
    return [
        layer.output_precision == Precision.INT8
        for layer in engine.layers
        if any(n.startswith(f"{op_prefix}_") for n in layer.onnx_nodes) and not layer.is_reformat
    ]


def facts(engine: EngineGraph) -> dict[str, object]:
    convs = [layer for layer in engine.layers if layer.kind == LayerKind.CONVOLUTION]
    return {
        "qdq_reformats": len(engine.qdq_reformats()),
        "residual_blocks_int8_out": _containing(engine, "Add"),
        "maxpool_int8": _containing(engine, "MaxPool"),
        "global_avgpool_int8": _containing(engine, "GlobalAveragePool"),
        "int8_conv_outputs": sum(1 for c in convs if c.output_precision == Precision.INT8),
    }


@pytest.mark.parametrize("variant", VARIANTS)
def test_prediction_matches_the_real_tensorrt_engine(
    variant: str, resnets: dict[str, onnx.ModelProto]
) -> None:
    real = facts(real_engine(variant))
    predicted = facts(predict_engine(ir.serde.deserialize_model(resnets[variant]), trt="8.6"))
    assert predicted == real


def test_the_real_engines_say_what_the_issue_says() -> None:
    counts = [len(real_engine(v).qdq_reformats()) for v in VARIANTS]
    assert counts == [10, 3, 1]
    assert facts(real_engine("qat"))["residual_blocks_int8_out"] == [False] * 8
    assert facts(real_engine("qat-residual"))["residual_blocks_int8_out"] == [True] * 7 + [False]


def test_stem_maxpool_joins_the_int8_conv_when_every_reader_is_quantized(
    resnets: dict[str, onnx.ModelProto]
) -> None:
    engine = predict_engine(ir.serde.deserialize_model(resnets["qat-residual"]))
    stem = engine.layers[1]
    assert stem.type_name == "ConvActPool"
    assert any(n.startswith("MaxPool_") for n in stem.onnx_nodes)
    assert stem.output_precision == Precision.INT8


def test_strongly_typed_trt11_keeps_the_fp32_remainder(resnets: dict[str, onnx.ModelProto]) -> None:
    def float_outputs(engine: EngineGraph) -> set[str]:
        outputs = {t.name for t in engine.outputs}
        return {str(layer.output_precision) for layer in engine.layers
                if not layer.is_reformat and not layer.output_precision.is_quantized
                and not outputs & {t.name for t in layer.outputs}}

    weak = predict_engine(ir.serde.deserialize_model(resnets["qat"]), trt="10")
    strong = predict_engine(ir.serde.deserialize_model(resnets["qat"]), trt="11")
    assert float_outputs(weak) == {"FP16"}
    assert float_outputs(strong) == {"FP32"}
    # The network output keeps its ONNX type in both (no --outputIOFormats).
    assert weak.layers[-1].output_precision == strong.layers[-1].output_precision == Precision.FP32


def test_fp16_model_runs_fp16_when_strongly_typed() -> None:
    from qdqkit.examples.builder import demo_network

    engine = predict_engine(ir.serde.deserialize_model(demo_network("modelopt")), trt="11")
    inner = [layer for layer in engine.layers if not layer.is_reformat and "cast" not in layer.name]
    assert {str(layer.output_precision) for layer in inner} <= {"INT8", "FP16"}


def test_pad_folds_into_the_conv_and_relu_into_its_epilogue() -> None:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 32, 16, 16]))
    p = g.node("Pad", [x, g.const(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))], name="pad")
    y = g.node("Relu", [g.conv(p, 32, 32, k=3, name="conv")], name="relu")
    g.output(y)
    engine = predict_engine(g.ir())
    conv = next(layer for layer in engine.layers if "conv" in layer.onnx_nodes)
    assert {"pad", "relu"} <= set(conv.onnx_nodes)
    assert len([layer for layer in engine.layers if not layer.is_reformat]) == 1
    assert conv.precision == Precision.INT8


def _gelu_after_conv(*, group: int = 1, float_reader: bool = False) -> ir.Model:
    """Conv -> bias Add -> Identity -> x * 0.5 * (1 + Erf(x / sqrt 2)) -> Q/DQ -> conv, as
    paddle2onnx writes a GELU; ``float_reader`` also reads the conv's output in float."""
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 32, 8, 8]), name="in")
    y = g.conv(x, 32, 32, group=group, bias=False, name="conv")
    y = g.node("Add", [y, g.const(np.full((1, 32, 1, 1), 0.1, np.float32))], name="bias")
    y = g.node("Identity", [y], name="copy")
    half, one, root2 = (g.const(np.array(v, np.float32)) for v in (0.5, 1.0, 2 ** 0.5))
    erf = g.node("Erf", [g.node("Div", [y, root2], name="div")], name="erf")
    gelu = g.node("Mul", [g.node("Mul", [y, g.node("Add", [erf, one], name="plus1")],
                                 name="mul"), half], name="gelu")
    if float_reader:
        g.output(g.node("Sigmoid", [y], name="other"))
    g.output(g.conv(g.qdq(gelu, 0.05, name="act"), 32, 32, name="next"))
    return g.ir()


def test_a_conv_takes_the_gelu_after_it_and_writes_int8() -> None:
    """Ampere and later GPUs match a pointwise DAG as one fusion and fuse it into the conv (C8;
    TensorRT issues 1240 and 2572, ptlflow issue 65's `Conv + PWN(... Erf ...)` layer): the Q
    after the GELU fuses too. Not on DLA, and not after a depthwise conv."""
    gelu = {"bias", "copy", "div", "erf", "plus1", "mul", "gelu"}
    engine = predict_engine(_gelu_after_conv(), trt="10")
    conv = next(layer for layer in engine.layers if "conv" in layer.onnx_nodes)
    assert gelu <= set(conv.onnx_nodes) and conv.output_precision == Precision.INT8
    assert [layer.name for layer in engine.reformats()] == ["in_Q"]  # the network input only
    for model, why in ((_gelu_after_conv(group=32), "depthwise"),
                       (_gelu_after_conv(float_reader=True), "read elsewhere")):
        engine = predict_engine(model, trt="10")
        conv = next(layer for layer in engine.layers if "conv" in layer.onnx_nodes)
        assert not {"div", "erf", "gelu"} & set(conv.onnx_nodes), why
        assert "act_Q" in [layer.name for layer in engine.reformats()], why
    engine = predict_engine(_gelu_after_conv(), trt="10", target="dla")
    conv = next(layer for layer in engine.layers if "conv" in layer.onnx_nodes)
    assert {"bias", "copy"} <= set(conv.onnx_nodes) and "erf" not in conv.onnx_nodes


def test_a_residual_add_behind_an_identity_fuses_into_the_conv() -> None:
    """paddle2onnx puts an Identity after every op; TensorRT removes them, so Conv -> Identity ->
    Add(skip) is the usual residual fusion (C3)."""
    g = GraphBuilder()
    x = g.node("Relu", [g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32, name="c0")])
    y = g.node("Identity", [g.conv(g.qdq(x, 0.05, name="main"), 32, 32, name="c1")], name="copy")
    out = g.node("Add", [y, g.qdq(x, 0.05, name="skip")], name="add")
    g.output(g.conv(g.qdq(g.node("Relu", [out], name="relu"), 0.05), 32, 32, name="c2"))
    engine = predict_engine(g.ir(), trt="10")
    conv = next(layer for layer in engine.layers if "c1" in layer.onnx_nodes)
    assert {"copy", "add", "relu"} <= set(conv.onnx_nodes)
    assert conv.output_precision == Precision.INT8


def test_a_two_input_sum_fuses_into_the_conv_as_a_residual_add() -> None:
    """Caffe2 and TensorFlow exports write residual additions as Sum; TensorRT's parser builds a
    two-input Sum as the same elementwise SUM layer as Add, which fuses into the conv (C3)."""
    engines = {}
    for op in ("Add", "Sum"):
        g = GraphBuilder()
        x = g.node("Relu", [g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32, name="c0")])
        y = g.conv(g.qdq(x, 0.05, name="main"), 32, 32, name="c1")
        out = g.node(op, [y, g.qdq(x, 0.05, name="skip")], name="add")
        g.output(g.conv(g.qdq(g.node("Relu", [out], name="relu"), 0.05), 32, 32, name="c2"))
        engines[op] = predict_engine(g.ir(), trt="10")
    for engine in engines.values():
        conv = next(layer for layer in engine.layers if "c1" in layer.onnx_nodes)
        assert {"add", "relu"} <= set(conv.onnx_nodes)
        assert conv.output_precision == Precision.INT8
    assert [(layer.name, layer.precision) for layer in engines["Sum"].layers] == [
        (layer.name, layer.precision) for layer in engines["Add"].layers]


def test_concat_with_one_scale_is_elided_in_int8() -> None:
    g = GraphBuilder()
    x = g.dequantize(g.quantize(g.input("x", [1, 32, 8, 8]), 0.1, name="q1"), 0.1)
    a = g.qdq(g.conv(x, 32, 32, name="a"), 0.2)
    b = g.qdq(g.conv(x, 32, 32, name="b"), 0.2)
    c = g.node("Concat", [a, b], name="cat", axis=1)
    g.output(g.conv(g.qdq(c, 0.2), 64, 32, name="c"))
    engine = predict_engine(g.ir())
    assert "cat" in engine.metadata["elided_nodes"]
    assert [layer.name for layer in engine.reformats()] == ["q1"]  # only the network input


def test_dla_places_supported_layers_and_reports_gpu_fallback() -> None:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 32, 8, 8]))
    y = g.node("Relu", [g.conv(x, 32, 32, name="conv")], name="relu")
    z = g.node("Erf", [y], name="erf")  # not a DLA pointwise op
    g.output(g.node("Relu", [z], name="relu2"))
    engine = predict_engine(g.ir(), target="dla")
    devices = {layer.name: layer.device for layer in engine.layers if not layer.is_reformat}
    assert devices[next(n for n in devices if "conv" in n)] == "DLA"
    assert devices[next(n for n in devices if "erf" in n)] == "GPU"
    assert any(layer.origin == "layout" for layer in engine.layers)


def _dla_stack(shape: list[int | str], inner: list[int | str] | None = None) -> ir.Model:
    """Conv -> Relu -> Conv on ``shape``; ``inner`` declares the Relu output's shape."""
    g = GraphBuilder()
    y = g.node("Relu", [g.conv(g.qdq(g.input("x", shape)), 32, 32, name="conv")], name="relu")
    g.output(g.conv(g.qdq(y), 32, 32, name="conv2"))
    model = g.proto()
    if inner is not None:
        model.graph.value_info.append(onnx.helper.make_tensor_value_info(y, 1, inner))
    return ir.serde.deserialize_model(model)


def test_dla_takes_dimensions_that_follow_from_dynamic_inputs_as_fixed_by_the_build() -> None:
    # DLA builds one shape (min = opt = max, I5): a dynamic input's dimensions, and those that
    # follow from them, are what --shapes fixes, not a dynamic shape at each layer.
    dynamic = predict_engine(_dla_stack(["N", 32, "H", "W"]), target="dla")
    assert {layer.device for layer in dynamic.layers} == {"DLA"}
    # With static inputs, a dimension that is not a number is the data's: a dynamic shape.
    static = predict_engine(_dla_stack([1, 32, 8, 8], inner=[1, 32, "rows", 8]), target="dla")
    fallback = [layer for layer in static.layers if layer.device == "GPU" and not layer.is_reformat]
    assert fallback and all("dynamic shape on" in " ".join(layer.notes) for layer in fallback)


def test_dla_converts_a_tensor_that_a_gpu_layer_writes_on_the_gpu() -> None:
    # Implicit INT8 has no Q/DQ layer: a Q between two GPU fallbacks is not a DLA submission
    # of its own with a boundary Reformat on each side.
    g = GraphBuilder()
    y = g.node("Erf", [g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32, name="conv")],
               name="erf")
    mid = g.qdq(y, name="mid")
    g.output(g.node("MatMul", [mid, mid], name="mm"))  # no constant operand: GPU (I5)
    engine = predict_engine(g.ir(), trt="10", target="dla")
    mid = next(layer for layer in engine.layers if "mid_Q" in layer.onnx_nodes)
    assert mid.device == "GPU"
    boundaries = [layer.name for layer in engine.layers if layer.origin == "layout"]
    assert not any("erf_out" in name or "mid" in name for name in boundaries), boundaries


def test_dla_takes_ranges_inside_a_silu_into_the_conv_layer() -> None:
    # The implicit DLA build turns each Q/DQ into a tensor's range: the conv, the SiLU and the
    # ranges between them are one layer, where an explicit GPU build splits them (C7).
    def model() -> ir.Model:
        g = GraphBuilder()
        y = g.qdq(g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32, name="conv"), 0.1,
                  name="inner")
        silu = g.node("Mul", [y, g.qdq(g.node("Sigmoid", [y], name="sig"), 1 / 127, name="s")],
                      name="mul")
        g.output(g.conv(g.qdq(silu, 0.1, name="out"), 32, 32, name="next"))
        return g.ir()

    dla = [layer for layer in predict_engine(model(), trt="10", target="dla").layers
           if not layer.is_reformat]
    gpu = [layer for layer in predict_engine(model(), trt="10").layers if not layer.is_reformat]
    first = next(layer for layer in dla if "conv" in layer.onnx_nodes)
    assert {"sig", "mul", "inner_Q", "s_DQ"} <= set(first.onnx_nodes)
    assert "sig" in first.name and "inner_Q" not in first.name  # named as the translated model
    assert first.outputs[0].precision == Precision.INT8
    assert len(dla) == 2 and len(gpu) > 2


def _ranged_hardswish() -> ir.Model:
    """conv -> ReLU, then x * Clip(x + 3, 0, 6) / 6 with a range on every tensor, then a conv."""
    g = GraphBuilder()
    x = g.qdq(g.node("Relu", [g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32, name="c0")]),
              0.05, name="x")
    shifted = g.qdq(g.node("Add", [x, g.const(np.float32(3))], name="add"), 0.07, name="a")
    clipped = g.qdq(g.node("Clip", [shifted, g.const(np.float32(0)), g.const(np.float32(6))],
                           name="clip"), 0.05, name="c")
    product = g.qdq(g.node("Mul", [x, clipped], name="mul"), 0.3, name="m")
    out = g.node("Div", [product, g.const(np.float32(6))], name="div")
    g.output(g.conv(g.qdq(out, 0.05, name="out"), 32, 32, name="c1"))
    return g.ir()


def test_dla_takes_ranges_inside_a_pointwise_chain_into_one_layer() -> None:
    # Built implicitly, a range between pointwise ops cuts no fusion: the decomposed HardSwish is
    # one PointWise layer on DLA, as in DLA's own FP16 build, where the explicit GPU build
    # quantizes between its ops.
    dla = predict_engine(_ranged_hardswish(), trt="10", target="dla")
    pointwise = [layer for layer in dla.layers if "add" in layer.onnx_nodes]
    assert len(pointwise) == 1
    layer = pointwise[0]
    assert {"add", "clip", "mul", "div", "a_Q", "m_DQ"} <= set(layer.onnx_nodes)
    assert layer.name == "add + clip + mul + div"  # named as the translated model's nodes
    assert layer.outputs[0].precision == Precision.INT8
    gpu = predict_engine(_ranged_hardswish(), trt="10")
    assert len({id(lay) for lay in gpu.layers for n in ("add", "clip", "mul", "div")
                if n in lay.onnx_nodes}) > 1


def test_predict_engine_reads_a_path(tmp_path: Path) -> None:
    g = GraphBuilder()
    g.output(g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32))
    path = tmp_path / "m.onnx"
    onnx.save(g.proto(), path)
    engine = predict_engine(str(path), trt="10")
    assert engine.source == "predicted" and engine.trt_version == "10"
    assert [layer.kind for layer in engine.layers] == [LayerKind.REFORMAT, LayerKind.CONVOLUTION]


def test_unknown_trt_version_and_target_are_one_line_errors() -> None:
    g = GraphBuilder()
    g.output(g.node("Relu", [g.input("x", [1, 4])]))
    with pytest.raises(QdqkitError, match="TensorRT version '7'"):
        predict_engine(g.ir(), trt="7")
    with pytest.raises(QdqkitError, match="target 'tpu'"):
        predict_engine(g.ir(), target="tpu")


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_resnet_node_lands_in_a_layer(variant: str, resnets: dict[str, onnx.ModelProto]) -> None:
    assert every_node_is_accounted_for(ir.serde.deserialize_model(resnets[variant])) == []


def test_the_fp16_baseline_of_a_dla_prediction_is_built_for_dla() -> None:
    # INT8 on DLA is judged against FP16 on DLA: a GPU build would fuse the HardSwish into the
    # conv (C8), which DLA does not, and make INT8 look slower than it is.
    from qdqkit.linting.latency import float_build

    def holder(engine: EngineGraph) -> set[str]:
        return set(next(layer for layer in engine.layers if "c0" in layer.onnx_nodes).onnx_nodes)

    assert "add" in holder(float_build(_ranged_hardswish(), "10"))
    assert "add" not in holder(float_build(_ranged_hardswish(), "10", target="dla"))
    from qdqkit.linting import lint

    latency = lint(_ranged_hardswish(), trt="10", target="dla").latency
    assert latency is not None
    dla_fp16 = float_build(_ranged_hardswish(), "10", target="dla")
    assert latency.fp16.layers and len(latency.fp16.layers) == len(dla_fp16.layers)


def test_lint_infers_value_types_once_and_its_fp16_baseline_matches_one_inferred_anew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The FP16 baseline is the same graph without Q/DQ: removing them changes no other value's
    # type, so the prediction's inferred types serve both engines and ONNX inference runs once.
    from qdqkit.linting import lint
    from qdqkit.linting.latency import float_build
    from qdqkit.trt.cost_model import estimate_latency
    from qdqkit.trt.gpus import find_gpu

    model = ir.serde.deserialize_model(resnet18_qdq())
    for node in model.graph:
        for value in node.outputs:
            if not value.is_graph_output():
                value.shape = None
    anew = estimate_latency(float_build(model, "8.6"), find_gpu("a100"))
    calls = []
    real = onnx.shape_inference.infer_shapes

    def counted(*args: object, **kwargs: object) -> onnx.ModelProto:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", counted)
    latency = lint(model).latency
    assert len(calls) == 1
    assert latency is not None and latency.fp16.layers
    assert latency.fp16.to_json() == anew.to_json()
