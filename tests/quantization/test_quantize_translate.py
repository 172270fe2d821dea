"""A TensorRT 11 quantize output (FP16 remainder) is a valid Q/DQ model for translate too."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from qdqkit.core.qdq import QdqView
from qdqkit.quantization import quantize
from qdqkit.translation.api import TranslateOptions, translate_model
from tests.quantization.float_models import (
    calibration_batches,
    mobilenet,
    resnet,
    transformer,
    yolo,
)


@pytest.mark.parametrize("family", [resnet, yolo, mobilenet, transformer])
def test_fp16_remainder_pairs_share_scales_and_translate(family) -> None:  # type: ignore[no-untyped-def]
    builder = family()
    model = quantize(builder.proto(), calibration_batches(builder, 4), trt="11").model
    assert model is not None
    view = QdqView(model.graph)
    pairs = 0
    for q in view.quantize_nodes:
        for dq in view.dequantizers_of(q):
            q_scale = q.inputs[1].const_value.numpy()
            dq_scale = dq.inputs[1].const_value.numpy()
            assert np.array_equal(q_scale.astype(np.float32), dq_scale.astype(np.float32)), q.name
            pairs += 1
    assert pairs
    # Valid ONNX to the letter: types checked against every operator's schema.
    onnx.checker.check_model(ir.serde.serialize_model(model), full_check=True)
    translation = translate_model(model, TranslateOptions(), where="quantized")
    assert translation.qdq_left == 0 and translation.qdq_scale_count > 0


def test_nodes_named_after_a_tensor_with_commas_can_be_listed_for_trtexec() -> None:
    # One real model names its output with a JSON label map: the FP16 remainder's output Cast
    # and every Q/DQ are named after tensors, and trtexec's --layerPrecisions splits at commas.
    builder = resnet()
    proto = builder.proto()
    label = '{"1": "cat", "2": "dog"}'
    for node in proto.graph.node:
        node.output[:] = [label if name == "logits" else name for name in node.output]
    proto.graph.output[0].name = label
    model = quantize(proto, calibration_batches(builder, 2), trt="11").model
    assert model is not None
    assert [v.name for v in model.graph.outputs] == [label]
    assert not [n.name for n in model.graph if "," in (n.name or "")]
    translation = translate_model(model, TranslateOptions(), where="quantized")
    assert translation.qdq_scale_count > 0
