"""lint runs on what every producer writes, and on the real Q/DQ models in the fixtures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from qdqkit.examples.builder import NetBuilder, build_qdq, demo_network, resnet_block
from qdqkit.examples.graph import GraphBuilder
from qdqkit.linting import lint
from qdqkit.trt.engine import Precision
from tests.models import every_node_is_accounted_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _float_resnet(path: Path) -> None:
    b = NetBuilder(name="f")
    x = b.input("input", [1, 3, 32, 32])
    y = b.conv(x, 3, 32, name="stem", quantize_input=False)
    y = b.node("MaxPool", [y], name="pool", kernel_shape=[2, 2], strides=[2, 2])
    y = resnet_block(b, y, 32, quantize_residual=False, name="l0")
    y = b.node("GlobalAveragePool", [y], name="gap")
    y = b.node("Flatten", [y], name="flat")
    y = b.gemm(y, 32, 10, name="fc", quantize_input=False, out="logits")
    b.output("logits", [1, 10])
    onnx.save(b.float_model(), path)


@pytest.fixture(scope="module")
def ort_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.n = 0

        def get_next(self) -> dict[str, np.ndarray] | None:
            self.n += 1
            if self.n > 3:
                return None
            rng = np.random.default_rng(self.n)
            return {"input": rng.uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)}

    folder = tmp_path_factory.mktemp("ort")
    source = folder / "float.onnx"
    _float_resnet(source)
    out = {}
    presets = {
        "default": {},
        "trt": {"activation_type": QuantType.QInt8, "weight_type": QuantType.QInt8,
                "per_channel": True,
                "extra_options": {"ActivationSymmetric": True, "WeightSymmetric": True}},
    }
    for name, options in presets.items():
        out[name] = folder / f"{name}.onnx"
        quantize_static(str(source), str(out[name]), Reader(), quant_format=QuantFormat.QDQ,
                        **options)  # type: ignore[arg-type]
    return out


def test_onnxruntime_default_preset_is_rejected_for_its_zero_points(
    ort_models: dict[str, Path]
) -> None:
    result = lint(ort_models["default"])
    assert "QDQ402" in result.codes() and result.exit_code == 1
    assert "QDQ101" not in result.codes()  # the activations are quantized, just asymmetrically


def test_onnxruntime_trt_preset_breaks_conv_epilogues_and_residual(
    ort_models: dict[str, Path]
) -> None:
    result = lint(ort_models["trt"])
    # Q/DQ between every Conv and its BatchNorm, both residual inputs quantized (landscape 2.2).
    assert {"QDQ103", "QDQ202", "QDQ203"} <= set(result.codes())
    assert "QDQ402" not in result.codes()
    assert result.summary.int8_mac_share == pytest.approx(1.0)


@pytest.mark.parametrize("preset", ["default", "trt"])
def test_every_node_of_an_onnxruntime_model_lands_in_a_layer(
    ort_models: dict[str, Path], preset: str
) -> None:
    assert every_node_is_accounted_for(ir.load(ort_models[preset])) == []


def test_modelopt_style_fp16_model() -> None:
    model = ir.serde.deserialize_model(demo_network("modelopt"))
    result = lint(model)
    assert not [g for g in result.groups if g.severity.value == "error"]
    strong = lint(ir.serde.deserialize_model(demo_network("modelopt")), trt="11")
    fp32 = [layer for layer in strong.engine.layers
            if not layer.is_reformat and layer.precision == Precision.FP32]
    # The fp32 I/O casts stay FP32 when strongly typed, as the converter meant: the model runs
    # FP16 elsewhere, so that is a choice, not a forgotten conversion (QDQ503 rule 2).
    assert fp32 and "QDQ503" not in strong.codes()


def test_nncf_style_both_add_inputs_with_unequal_scales() -> None:
    b = NetBuilder(name="nncf", seed=3)
    x = b.input("input", [1, 32, 16, 16])
    y = b.conv(x, 32, 32, name="c1")
    z = b.conv(y, 32, 32, relu=False, name="c2")
    b.quantize(z)  # NNCF quantizes both Add inputs
    y = b.node("Add", [z, b.quantize(y)], name="add")
    b.output(b.node("Relu", [y], name="relu"))
    result = lint(ir.serde.deserialize_model(build_qdq(b)))
    assert {"QDQ202", "QDQ203"} <= set(result.codes())


def test_qat_export_style_demo_is_clean_of_errors() -> None:
    result = lint(ir.serde.deserialize_model(demo_network("trt")))
    assert result.errors == 0 and result.summary.int8_mac_share == pytest.approx(1.0)


@pytest.mark.parametrize("name", ["polygraphy_qdq_conv.onnx", "polygraphy_weightless_qdq_conv.onnx"])
def test_real_polygraphy_qdq_models(name: str) -> None:
    result = lint(FIXTURES / "models" / name)
    # Their uint8 zero point is 84..196: TensorRT's parser accepts only zero zero points (A1).
    assert "QDQ402" in result.codes()


def test_real_float_residual_block() -> None:
    result = lint(FIXTURES / "models" / "polygraphy_residual_block.onnx")
    assert result.codes() == ["QDQ501"]
    assert result.summary.layers > 0 and result.summary.reformats == 0


def test_graph_with_subgraph_free_opset19_fp16_scales() -> None:
    g = GraphBuilder(opset=19)
    x = g.input("x", [1, 32, 8, 8])
    s = g.const(np.array(0.05, np.float16))
    xq = g.node("QuantizeLinear", [g.node("Cast", [x], to=onnx.TensorProto.FLOAT16), s])
    y = g.conv(g.node("Cast", [g.node("DequantizeLinear", [xq, s])], to=onnx.TensorProto.FLOAT), 32, 32)
    g.output(y)
    result = lint(g.ir())
    assert result.quantized and "QDQ408" not in result.codes()
