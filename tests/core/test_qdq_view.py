from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from qdqkit.core.qdq import DqSource, QdqView
from tests.models import qdq_conv_model


def _view(**kwargs: object) -> tuple[ir.Model, QdqView]:
    model = ir.serde.deserialize_model(qdq_conv_model(**kwargs))  # type: ignore[arg-type]
    return model, QdqView(model.graph)


@pytest.mark.parametrize("scale_as", ["initializer", "constant", "identity", "cast"])
def test_activation_scale_is_read_however_it_is_spelled(scale_as: str) -> None:
    model, view = _view(scale_as=scale_as)
    x = model.graph.inputs[0]
    scale = view.activation_scale_of(x)
    # Exactly the stored number: float32 0.02, or the fp16 value that the Cast widens.
    expected = float(np.float16(0.02)) if scale_as == "cast" else float(np.float32(0.02))
    assert scale == expected


def test_q_without_zero_point_defaults_to_uint8_per_spec() -> None:
    _, view = _view(zero_point=None)
    q = view.quantize_nodes[0]
    params = view.params(q)
    assert params is not None and params.zero_point is None
    assert params.quant_dtype == ir.DataType.UINT8
    assert params.zero_point_is_zero


@pytest.mark.parametrize("style", ["q-dq", "dq-only"])
def test_weight_ref_finds_the_weight_in_each_style(style: str) -> None:
    model, view = _view(weight_style=style)
    conv = next(n for n in model.graph if n.op_type == "Conv")
    assert view.weight_index(conv) == 1
    assert view.activation_index(conv) == 0
    ref = view.weight_ref(conv, 1)
    assert ref is not None and ref.quantized and ref.style == style
    assert ref.params is not None and ref.params.per_channel and ref.params.axis == 0
    assert view.input_is_dequantized(conv, 0)
    dq = ref.dequantize
    assert dq is not None
    expected = DqSource.QUANTIZE if style == "q-dq" else DqSource.CONSTANT
    assert view.dq_source(dq) is expected


def test_weight_ref_walks_through_weight_path_ops() -> None:
    model, view = _view(tf_weight_path=True)
    conv = next(n for n in model.graph if n.op_type == "Conv")
    ref = view.weight_ref(conv, 1)
    assert ref is not None and [n.op_type for n in ref.path] == ["Identity"]


def test_activation_quantizers_exclude_weight_quantizers() -> None:
    _, view = _view()
    assert [q.name for q in view.activation_quantizers()] == ["q_x"]
    assert view.qdq_count == 4
