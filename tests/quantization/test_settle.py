"""settle keeps a round only when its whole engine is predicted faster (rule 3)."""

from __future__ import annotations

import pytest

import qdqkit.quantization.settle as settle_module
from qdqkit.quantization import quantize
from qdqkit.trt.placement import costs
from qdqkit.trt.predict import Prediction
from tests.quantization.float_models import calibration_batches, resnet


def test_a_round_whose_drops_slow_the_engine_down_is_not_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    builder = resnet(size=128)
    judged: list[int] = []
    real_unpaid = costs.unpaid_points

    def every_region_unpaid(prediction: Prediction, fp16_engine, gpu=costs.DEFAULT_GPU):  # type: ignore[no-untyped-def]
        # A wrong call, as a region judged alone can be: every INT8 layer is declared unpaid.
        judged.append(len(real_unpaid(prediction, fp16_engine, gpu)))
        nodes = tuple(node for layer in prediction.engine.layers if costs._int8(layer)
                      for node in prediction.facts.graph if node.name in layer.onnx_nodes)
        return [costs.Unpaid(("every region",), nodes, 1.0, 0.0)] if nodes else []

    monkeypatch.setattr(settle_module, "unpaid_points", every_region_unpaid)
    result = quantize(builder.proto(), calibration_batches(builder, 2), trt="10")
    # Round 2 (everything float) is predicted slower than round 1, which is kept whole.
    assert len(judged) == 2
    assert all(w.quantized for w in result.weighted)
