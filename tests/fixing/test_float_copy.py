"""The float copy ``plan_target`` plans on equals the Q/DQ model cloned and stripped."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
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

