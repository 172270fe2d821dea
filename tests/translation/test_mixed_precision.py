"""translate of a mixed-precision Q/DQ model: its float32 nodes are pinned FP32, not FP16."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx_ir as ir

from qdqkit.core.qdq import QdqView
from qdqkit.examples.graph import GraphBuilder
from qdqkit.passes.float16_remainder import Float16Remainder
from qdqkit.translation import translate
from qdqkit.translation.api import TranslateOptions, translate_model


def _model(mixed: bool) -> ir.Model:
    """x -> Q/DQ -> conv1 -> Relu -> Tanh -> out; with ``mixed``, an FP16 remainder that keeps
    the Tanh FP32 (its input overflows FP16)."""
    g = GraphBuilder("mixed", opset=19, seed=5)
    x = g.input("x", [1, 4, 6, 6])
    y = g.node("Relu", [g.conv(g.qdq(x, 0.02), 4, 4, name="conv1", weight="dq-only")],
               name="relu")
    g.node("Tanh", [g.node("Neg", [y], name="neg")], name="tanh", out="out")
    g.output("out", [1, 4, 6, 6])
    model = g.ir()
    if mixed:
        neg = next(n for n in model.graph if n.name == "neg")
        Float16Remainder({neg.outputs[0].name: (-1e5, 0.0)})(model)
    return model


def test_float32_nodes_of_a_mixed_model_are_listed_fp32() -> None:
    translation = translate_model(_model(mixed=True), TranslateOptions())
    assert "tanh" in translation.fp32_nodes and "neg" in translation.fp32_nodes
    assert not set(translation.fp32_nodes) & set(translation.fp16_nodes)
    assert "relu" in translation.fp16_nodes


def test_an_all_float32_model_lists_no_fp32_nodes() -> None:
    translation = translate_model(_model(mixed=False), TranslateOptions())
    assert translation.fp32_nodes == [] and {"neg", "tanh"} <= set(translation.fp16_nodes)


def test_files_carry_the_fp32_layers(tmp_path: Path) -> None:
    source = tmp_path / "mixed.onnx"
    ir.save(_model(mixed=True), source)
    result = translate(source, tmp_path / "out")
    layer_arg = result.outputs.layer_arg.read_text()
    assert "tanh:fp32" in layer_arg and "relu:fp16" in layer_arg
    config = json.loads(result.outputs.precision_config.read_text())
    assert list(config) == ["int8_tensor_scales", "fp16_nodes", "fp32_nodes"]
    assert "tanh" in config["fp32_nodes"]


def test_a_float16_remainder_is_translated_in_float32_with_exact_weights() -> None:
    source = _model(mixed=True)
    view = QdqView(source.graph)
    conv = next(n for n in source.graph if n.name == "conv1")
    dq = conv.inputs[1].producer() if conv.inputs[1] is not None else None
    assert dq is not None and dq.op_type == "DequantizeLinear"
    params = view.params(dq)
    assert params is not None and params.scale.dtype == np.float16  # the remainder's scale
    q = dq.inputs[0].const_value.numpy().astype(np.float32)  # type: ignore[union-attr]
    axis = params.axis if params.axis is not None else 0
    shape = [1] * q.ndim
    shape[axis] = -1
    exact = q * params.scale.astype(np.float32).reshape(shape)  # q x s: exact in float32
    translation = translate_model(source, TranslateOptions())
    graph = translation.model.graph
    types = {v.dtype for v in (*graph.initializers.values(),
                               *(o for n in graph for o in n.outputs))}
    assert ir.DataType.FLOAT16 not in types
    weight = next(n for n in graph if n.name == "conv1").inputs[1]
    assert weight is not None and weight.const_value is not None
    assert np.array_equal(weight.const_value.numpy(), exact)
    # The float32 nodes are still pinned FP32, the rest FP16, as before widening.
    assert {"tanh", "neg"} <= set(translation.fp32_nodes) and "relu" in translation.fp16_nodes
