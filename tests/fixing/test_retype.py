"""The value types ``fix`` carries over a round of repairs equal what ONNX inference gives."""

from __future__ import annotations

import onnx_ir as ir
import pytest

from qdqkit.core.shapes import infer_value_types
from qdqkit.fixing.retype import RoundTypes
from qdqkit.passes.qdq_target import plan_target
from qdqkit.passes.replace_qdq import end_session, repair_scope, start_session
from tests.fixing import producers


@pytest.mark.parametrize("build", [producers.nncf, producers.ppq, producers.modelopt,
                                   producers.pytorch_quantization])
def test_carried_types_match_inference_after_repairs(build: object) -> None:
    assert callable(build)
    model: ir.Model = build()
    before = RoundTypes.of(model, infer_value_types(model))
    start_session(model, plan_target(model, types=before.types), types=before.types)
    changes = repair_scope(model, tensors=[v.name for n in model.graph for v in n.outputs
                                           if v.name and n.op_type not in ("QuantizeLinear",
                                                                           "DequantizeLinear")])
    end_session(model)
    assert changes  # the producer's spelling differs from the policy somewhere
    carried = before.after_round(model)
    assert carried is not None
    inferred = infer_value_types(model)
    for node in model.graph:
        for value in node.outputs:
            assert carried.shape_of(value) == inferred.shape_of(value), value.name
            assert carried.dtype_of(value) == inferred.dtype_of(value), value.name


def test_a_new_output_of_another_op_asks_for_inference() -> None:
    model = producers.nncf()
    before = RoundTypes.of(model, infer_value_types(model))
    relu = next(n for n in model.graph if n.op_type == "Relu")
    extra = ir.Node("", "Sigmoid", [relu.outputs[0]], name="new_sigmoid")
    extra.outputs[0].name = "new_sigmoid_out"
    model.graph.insert_after(relu, extra)
    assert before.after_round(model) is None
