"""quantize stores weights a model computes from constants, then quantizes them."""

from __future__ import annotations

from qdqkit.core.qdq import is_dequantize
from qdqkit.quantization import quantize
from tests.passes.test_fold_computed_weights import _computed_weight_model
from tests.quantization.float_models import calibration_batches


def test_a_computed_weight_is_quantized() -> None:
    g = _computed_weight_model()
    result = quantize(g.proto(), calibration_batches(g, 2), trt="10", keep_unpaid=True)
    conv = next(n for n in result.model.graph if n.op_type == "Conv")
    weight_producer = conv.inputs[1].producer()
    assert weight_producer is not None and is_dequantize(weight_producer)
    assert weight_producer.inputs[0].const_value is not None  # an int8 initializer
    assert not any(n.op_type in ("ConstantOfShape", "Mul") for n in result.model.graph)
