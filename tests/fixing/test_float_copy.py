"""The float copy ``plan_target`` plans on equals the Q/DQ model cloned and stripped."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from qdqkit.core.qdq import QdqView
from qdqkit.examples.graph import run_model
from qdqkit.passes import qdq_target
from qdqkit.passes.float_copy import float_copy
from tests.fixing import producers


@pytest.mark.parametrize("build", [producers.nncf, producers.modelopt, producers.tf_qat,
                                   producers.pytorch_quantization, producers.needs_calibration])
def test_float_copy_is_the_stripped_clone(build: Callable[[], ir.Model],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    model = build()
    copied = float_copy(model, QdqView(model.graph))
    assert copied is not None
    stripped = qdq_target._strip_clone(model)
    assert not [n for n in copied.graph if n.op_type in ("QuantizeLinear", "DequantizeLinear")]
    used = [n for n in stripped.graph if any(o.uses() or o.is_graph_output() for o in n.outputs)]
    assert [(n.name, n.op_type) for n in copied.graph] == [(n.name, n.op_type) for n in used]
    rng = np.random.default_rng(0)
    feeds = {v.name or "": rng.standard_normal([d if isinstance(d, int) else 1
                                                for d in v.shape or ()]).astype(np.float32)
             for v in copied.graph.inputs}
    for ours, theirs in zip(run_model(copied, feeds), run_model(stripped, feeds), strict=True):
        np.testing.assert_array_equal(ours, theirs)
    planned = qdq_target.plan_target(model).points
    monkeypatch.setattr(qdq_target, "float_copy", lambda m, v: None)  # the general path
    assert planned == qdq_target.plan_target(model).points


def test_a_dequantized_network_output_takes_the_general_path() -> None:
    model = producers.ppq()  # its DQ writes the network output
    assert float_copy(model, QdqView(model.graph)) is None
    assert qdq_target.plan_target(model).points



def test_a_pair_that_also_converts_becomes_a_cast() -> None:
    # fix moves ModelOpt's input Q in front of the input's Cast to fp16 (so the engine reads the
    # input as INT8): the pair then reads float32 and writes float16, and the float graph calibration
    # runs needs a Cast there, or its conv reads float32 beside float16 weights.
    from qdqkit.fixing.api import _prepare

    model = producers.modelopt()
    _prepare(model)
    (pair,) = [n for n in model.graph if n.name == "input_Q"]
    assert pair.inputs[0] is not None and pair.inputs[0].is_graph_input()
    assert float_copy(model, QdqView(model.graph)) is None
    plan = qdq_target.plan_target(model)
    copied = plan.float_model
    assert copied is not None
    # The Cast keeps the values, so the input's scale carries across it to the conv's input.
    assert not plan.missing
    (cast,) = [n for n in copied.graph if n.op_type == "Cast" and n.inputs[0] is not None
               and n.inputs[0].is_graph_input()]
    assert cast.attributes["to"].as_int() == onnx.TensorProto.FLOAT16
    feeds = {"input": np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    (logits,) = run_model(copied, feeds)
    float_model = producers.modelopt()  # the same graph with its Q/DQ and its own input Cast
    expected = run_model(qdq_target._strip_clone(float_model), feeds)[0]
    np.testing.assert_allclose(logits, expected, rtol=1e-2, atol=1e-2)
