"""The issue's figures on every producer style: zero Q/DQ left, activation scales copied exactly,
and the emulated implicit-INT8 model within 40 dB of the Q/DQ model where weight scales are
max|w|/127."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from qdqkit.core.constants import constant_array, constant_derived_values
from qdqkit.core.model_io import load_model
from qdqkit.core.qdq import QdqView
from qdqkit.examples.builder import demo_network
from qdqkit.translation import TranslateOptions, translate
from qdqkit.trt.calib_cache import read_calib_cache, scale_to_hex
from qdqkit.verification import verify
from tests.models import qdq_count

FIXTURES = Path(__file__).parents[1] / "fixtures" / "translate"


def _built(style: str, tmp_path: Path) -> Path:
    path = tmp_path / f"built_{style}.onnx"
    onnx.save(demo_network(style), path)
    return path


STYLES = {
    "trt-qat-built": lambda tmp: _built("trt", tmp),
    "modelopt-opset19-fp16-built": lambda tmp: _built("modelopt", tmp),
    "torch-fake-quant-export": lambda tmp: FIXTURES / "torch_fq_qat.onnx",
    "ort-quantize-static-dq-only-weights": lambda tmp: FIXTURES / "mnist_ort_qdq.onnx",
    "ort-quantize-static-qdq-weights": lambda tmp: FIXTURES / "mnist_ort_qdq_wqdq.onnx",
    "ort-quantize-static-ultraface": lambda tmp: FIXTURES / "ultraface_ort_qdq.onnx",
}


def _activation_q_scales(path: Path) -> dict[str, float]:
    """Independent of the translator: every Q on a computed tensor, by the tensor's name."""
    model = load_model(path)
    constants = constant_derived_values(model.graph)
    scales: dict[str, float] = {}
    view = QdqView(model.graph)
    for q in view.quantize_nodes:
        x = q.inputs[0]
        if x is None or x in constants:
            continue
        scale = constant_array(q.inputs[1])
        assert scale is not None and scale.size == 1
        # A DQ that is a graph output keeps the output's name (outputs are never renamed).
        outputs = [dq.outputs[0].name for dq in view.dequantizers_of(q)
                   if dq.outputs[0].is_graph_output()]
        scales[outputs[0] if outputs else x.name or ""] = float(scale.reshape(-1)[0])
    return scales


@pytest.mark.parametrize("style", list(STYLES))
def test_style_translates_exactly_and_verifies(style: str, tmp_path: Path) -> None:
    source = STYLES[style](tmp_path)
    result = translate(source, tmp_path / "out", TranslateOptions(infer_concat_scales=True))
    out = result.outputs

    noqdq = onnx.load(out.noqdq_model)
    onnx.checker.check_model(noqdq)
    assert qdq_count(noqdq) == 0 and result.qdq_left == 0
    original = onnx.load(source)
    assert [o.name for o in noqdq.graph.output] == [o.name for o in original.graph.output]

    config = json.loads(out.precision_config.read_text())
    assert list(config) == ["int8_tensor_scales", "fp16_nodes"]
    expected = _activation_q_scales(source)
    assert expected, "every style here has activation quantizers"
    for tensor, scale in expected.items():
        assert config["int8_tensor_scales"][tensor] == scale, tensor  # exact, not approximate

    cache = read_calib_cache(out.calib_cache)
    assert list(cache.scales) == list(config["int8_tensor_scales"])
    for name, value in config["int8_tensor_scales"].items():
        assert scale_to_hex(cache.scales[name]) == scale_to_hex(value)
        assert np.isfinite(value) and value > 0

    layer_arg = out.layer_arg.read_text()
    entries = layer_arg.split(",") if layer_arg else []
    assert len(entries) == len(set(entries)) and all(e.endswith(":fp16") and e[:-5] for e in entries)
    assert not layer_arg.endswith("\n")
    node_names = {n.name for n in noqdq.graph.node}
    assert {e[:-5] for e in entries} <= node_names

    check = verify(source, tmp_path / "out")
    assert check.config_matches_cache and not check.missing_tensors
    if result.weight_scale_mismatches:
        # onnxruntime quantized mnist's MatMul weight per tensor: TensorRT recomputes it per
        # channel, so the translation is faithful to TensorRT but not to the Q/DQ numbers.
        assert style.startswith("ort") and check.min_snr_db > 25
    else:
        assert check.min_snr_db >= 40, check.outputs


def test_translating_twice_is_byte_identical(tmp_path: Path) -> None:
    source = _built("trt", tmp_path)
    first = translate(source, tmp_path / "a").outputs
    second = translate(source, tmp_path / "b").outputs
    for a, b in zip(first.all(), second.all(), strict=False):
        assert a.read_bytes() == b.read_bytes(), a.name


def test_output_formats_match_the_reference(tmp_path: Path) -> None:
    result = translate(FIXTURES / "torch_fq_qat.onnx", tmp_path, TranslateOptions("100300"))
    out = result.outputs
    assert [p.name for p in out.all()] == [
        "torch_fq_qat_noqdq.onnx", "torch_fq_qat_precision_config.json",
        "torch_fq_qat_precision_config_calib.cache", "torch_fq_qat_precision_config_layer_arg.txt",
    ]
    text = out.precision_config.read_text()
    assert not text.endswith("\n") and text.startswith('{\n    "int8_tensor_scales": {\n        "')
    assert json.dumps(json.loads(text), indent=4) == text
    cache = out.calib_cache.read_text().split("\n")
    assert cache[0] == "TRT-100300-EntropyCalibration2" and cache[-1] == ""
    assert cache[1] == f"input: {scale_to_hex(json.loads(text)['int8_tensor_scales']['input'])}"
    assert out.layer_arg.read_text() == "/Add:fp16,/Relu_2:fp16,/GlobalAveragePool:fp16"
