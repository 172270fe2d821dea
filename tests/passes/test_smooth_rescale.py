"""SmoothRescale before/after: the float model computes the same function, exactly up to rounding."""

from __future__ import annotations

import numpy as np

from qdqkit.core.numerics import make_session
from qdqkit.passes.smooth_rescale import Smoothing, SmoothRescale
from qdqkit.quantization.smooth import smoothing_candidates
from tests.quantization.float_models import calibration_batches, transformer


def test_rescale_keeps_the_float_function() -> None:
    builder = transformer()
    model = builder.ir()
    weighted = {n for n in model.graph if n.op_type == "MatMul" and n.inputs[1].const_value is not None}
    candidates = smoothing_candidates(model, weighted)
    sources = sorted(source.op_type for _, source, _ in candidates)
    assert sources == ["LayerNormalization", "LayerNormalization"]  # QKV and FFN1 inputs
    assert sorted(len(r) for _, _, r in candidates) == [1, 3]
    rng = np.random.default_rng(0)
    smoothings = [Smoothing(source, readers, rng.uniform(0.1, 10, 64).astype(np.float32))
                  for _, source, readers in candidates]
    SmoothRescale(smoothings)(model)
    feeds = calibration_batches(builder, 1, seed=4)[0]
    expected = builder.run(feeds)[0]
    got = make_session(model).run(None, feeds)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    ln = next(n for n in model.graph if n.op_type == "LayerNormalization")
    assert not np.allclose(ln.inputs[1].const_value.numpy(), 1.0)  # the scale really moved
