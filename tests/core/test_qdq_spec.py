"""QdqView parameter reading and qdq_math checked against the ONNX backend node tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import numpy_helper

from qdqkit.core.qdq import QdqView, is_dequantize, is_quantize
from qdqkit.core.qdq_math import dequantize, quantize

NODE_TESTS = Path(__file__).parent.parent / "fixtures" / "onnx-node-tests"
INTEGER_CASES = [
    "test_dequantizelinear",
    "test_dequantizelinear_axis",
    "test_dequantizelinear_blocked",
    "test_dequantizelinear_int16",
    "test_dequantizelinear_uint16",
    "test_dequantizelinear_int4",
    "test_dequantizelinear_uint4",
    "test_quantizelinear",
    "test_quantizelinear_axis",
    "test_quantizelinear_blocked_asymmetric",
    "test_quantizelinear_blocked_symmetric",
    "test_quantizelinear_int16",
    "test_quantizelinear_uint16",
    "test_quantizelinear_int4",
    "test_quantizelinear_uint4",
]


def _load_case(case: str) -> tuple[ir.Model, list[np.ndarray], np.ndarray]:
    """The node-test model with its scale/zero-point inputs turned into initializers."""
    folder = NODE_TESTS / case
    proto = onnx.load(folder / "model.onnx")
    data = folder / "test_data_set_0"
    inputs = []
    for i in range(len(proto.graph.input)):
        tensor = onnx.TensorProto()
        tensor.ParseFromString((data / f"input_{i}.pb").read_bytes())
        inputs.append(tensor)
    output = onnx.TensorProto()
    output.ParseFromString((data / "output_0.pb").read_bytes())
    for i, tensor in enumerate(inputs[1:], start=1):
        tensor.name = proto.graph.input[i].name
        proto.graph.initializer.append(tensor)
    del proto.graph.input[1:]
    model = ir.serde.deserialize_model(proto)
    return model, [numpy_helper.to_array(inputs[0])], numpy_helper.to_array(output)


@pytest.mark.parametrize("case", INTEGER_CASES)
def test_params_reproduce_the_spec_outputs(case: str) -> None:
    model, (x,), expected = _load_case(case)
    view = QdqView(model.graph)
    node = next(iter(model.graph))
    params = view.params(node)
    assert params is not None
    if is_dequantize(node):
        assert params.quant_dtype == ir.DataType(model.graph.inputs[0].dtype)
        np.testing.assert_array_equal(dequantize(x, params), expected.astype(np.float32))
    else:
        assert is_quantize(node)
        got = quantize(x, params)
        np.testing.assert_array_equal(got.astype(np.int64), expected.astype(np.int64))


@pytest.mark.parametrize("case", ["test_quantizelinear_e4m3fn", "test_quantizelinear_e5m2"])
def test_float8_quantization_reproduces_the_spec_outputs(case: str) -> None:
    # Saturating to the largest finite value, rounding to nearest even in the cast.
    model, (x,), expected = _load_case(case)
    params = QdqView(model.graph).params(next(iter(model.graph)))
    assert params is not None
    got = quantize(x, params)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got.astype(np.float32), expected.astype(np.float32))
    np.testing.assert_array_equal(dequantize(got, params),
                                  expected.astype(np.float32) * params.scale.astype(np.float32))


def test_axis_and_block_are_read() -> None:
    model, _, _ = _load_case("test_dequantizelinear_blocked")
    node = next(iter(model.graph))
    params = QdqView(model.graph).params(node)
    assert params is not None and params.blocked and params.block_size == 2 and params.axis == 1
    model, _, _ = _load_case("test_quantizelinear_axis")
    params = QdqView(model.graph).params(next(iter(model.graph)))
    assert params is not None and params.per_channel and params.axis == 1
    assert params.int8_compatible is (params.quant_dtype in (ir.DataType.INT8, ir.DataType.UINT8))


@pytest.mark.parametrize(
    ("case", "dtype"),
    [
        ("test_dequantizelinear_e4m3fn", ir.DataType.FLOAT8E4M3FN),
        ("test_dequantizelinear_e5m2", ir.DataType.FLOAT8E5M2),
        ("test_quantizelinear_e4m3fn", ir.DataType.FLOAT8E4M3FN),
        ("test_dequantizelinear_int4", ir.DataType.INT4),
        ("test_dequantizelinear_int16", ir.DataType.INT16),
    ],
)
def test_non_int8_types_are_recognised_and_not_int8_compatible(
    case: str, dtype: ir.DataType
) -> None:
    model, _, _ = _load_case(case)
    params = QdqView(model.graph).params(next(iter(model.graph)))
    assert params is not None
    assert params.quant_dtype == dtype
    assert not params.int8_compatible
