"""settle keeps a change only when the whole engine is predicted faster (rules 3 and 4)."""

from __future__ import annotations

import pytest

import qdqkit.quantization.settle as settle_module
from qdqkit.linting import lint
from qdqkit.quantization import quantize
from qdqkit.trt.placement import costs
from qdqkit.trt.predict import Prediction
from tests.quantization.float_models import calibration_batches, psa, resnet


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


def test_a_small_conv_whose_own_q_does_not_pay_stays_float_in_a_region_that_pays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # YOLO11's attention: the positional-encoding conv reads the value half the float attention
    # MatMul reads too, so its Q stands alone, and its sum with the attention output needs one
    # more. Its region (the whole backbone) pays, so only rule 4 sees that this one conv
    # float costs one Reformat instead of two.
    builder = psa()
    batches = calibration_batches(builder, 2)
    results = {}
    for trials in (0, settle_module.ENTRY_TRIALS):
        monkeypatch.setattr(settle_module, "ENTRY_TRIALS", trials)
        results[trials] = quantize(builder.proto(), batches, trt="11")
    decided = results[settle_module.ENTRY_TRIALS]
    assert [w.node for w in decided.weighted if not w.quantized] == ["pe"]
    assert "predicted faster" in next(w.reason for w in decided.weighted if w.node == "pe")
    assert "QDQ407" in lint(results[0].model, trt="11").codes()
    assert not {"QDQ205", "QDQ407"} & set(lint(decided.model, trt="11").codes())
