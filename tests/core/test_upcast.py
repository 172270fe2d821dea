from __future__ import annotations

import numpy as np
import onnx_ir as ir

from qdqkit.core.numerics import input_specs, make_session, random_feeds, run
from qdqkit.core.upcast import upcast_float16
from qdqkit.examples.builder import demo_network


def test_upcast_leaves_no_fp16_and_computes_the_same_function() -> None:
    model = ir.serde.deserialize_model(demo_network("modelopt"))
    session = make_session(model)
    feeds = random_feeds(input_specs(session), seed=5)
    before = run(session, feeds)["logits"]
    assert upcast_float16(model)
    assert not upcast_float16(model), "a second upcast has nothing left to change"
    for value in model.graph.initializers.values():
        assert value.const_value is not None and value.const_value.dtype != ir.DataType.FLOAT16
    for node in model.graph:
        assert all(o.dtype != ir.DataType.FLOAT16 for o in node.outputs)
    after = run(make_session(model), feeds)["logits"]
    # The same function without fp16 rounding: close to the fp16 run.
    np.testing.assert_allclose(after, before, rtol=0.05, atol=0.05)


def test_float32_model_is_left_alone() -> None:
    model = ir.serde.deserialize_model(demo_network("trt"))
    assert not upcast_float16(model)
