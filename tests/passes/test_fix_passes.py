"""The rewrites ``fix`` is built from, each run before and after in onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from qdqkit.examples.graph import GraphBuilder, run_model
from qdqkit.passes.float_bias import DequantizeBias
from qdqkit.passes.fold_batchnorm_qdq import FoldBatchNormIntoQuantizedConv
from qdqkit.passes.fold_weight_qdq_path import FoldDequantizedWeightPath
from qdqkit.passes.qdq_target import plan_target
from qdqkit.passes.replace_qdq import end_session, repair_scope, start_session
from tests.models import ops

X = np.random.default_rng(0).normal(size=(1, 8, 6, 6)).astype(np.float32)


def _close(before: ir.Model, after: ir.Model, atol: float = 1e-5) -> None:
    want, got = run_model(before, {"x": X})[0], run_model(after, {"x": X})[0]
    np.testing.assert_allclose(got, want, atol=atol, rtol=1e-5)


def test_int32_bias_dequantize_becomes_its_float_value() -> None:
    g = GraphBuilder()
    x = g.input("x", [1, 8, 6, 6])
    bias = g.dequantize(g.const(np.arange(-4, 4, dtype=np.int32), "b_int"), 0.01,
                        zero_point=None, name="b_DQ")
    w = g.weight((8, 8, 3, 3), style="dq-only", name="w")
    g.output(g.node("Conv", [x, w, bias], name="conv", kernel_shape=[3, 3], pads=[1] * 4))
    before = g.ir()
    after = g.ir()
    rewrite = DequantizeBias()
    rewrite(after)
    assert rewrite.changes == ["bias of 'conv' back to float"]
    assert ops(after).count("DequantizeLinear") == 1  # the weight's
    _close(before, after, atol=0.0)


def test_tf_weight_transpose_after_dq_is_folded_and_requantized_exactly() -> None:
    g = GraphBuilder()
    x = g.input("x", [1, 8, 6, 6])
    rng = np.random.default_rng(1)
    hwio = rng.normal(0, 0.1, (3, 3, 8, 4)).astype(np.float32)
    scale = (np.abs(hwio).reshape(-1, 4).max(axis=0) / 127).astype(np.float32)
    integers = np.clip(np.rint(hwio / scale), -127, 127).astype(np.int8)
    dq = g.dequantize(g.const(integers, "kernel"), scale, np.zeros(4, np.int8), axis=3)
    oihw = g.node("Transpose", [dq], perm=[3, 2, 0, 1], name="kernel_T")
    g.output(g.node("Conv", [x, oihw], name="conv", kernel_shape=[3, 3], pads=[1] * 4))
    before, after = g.ir(), g.ir()
    rewrite = FoldDequantizedWeightPath()
    rewrite(after)
    assert ops(after) == ["DequantizeLinear", "Conv"] and len(rewrite.changes) == 1
    # The per-channel scales were max|w|/127 already: re-quantizing gives the same weights.
    _close(before, after, atol=1e-6)


def test_batchnorm_after_a_quantized_conv_folds_with_the_weight_requantized() -> None:
    g = GraphBuilder()
    x = g.input("x", [1, 8, 6, 6])
    y = g.conv(g.qdq(x, 0.05, name="in"), 8, 8, name="conv", weight="dq-only", bias=False)
    g.output(g.bn(y, 8, name="bn", random=True))
    before, after = g.ir(), g.ir()
    rewrite = FoldBatchNormIntoQuantizedConv()
    rewrite(after)
    assert "BatchNormalization" not in ops(after) and len(rewrite.changes) == 1
    # The folded weight is quantized again: off by at most half a step of the new scale.
    _close(before, after, atol=0.05)


def _epilogue_qdq_model() -> ir.Model:
    g = GraphBuilder()
    x = g.input("x", [1, 8, 6, 6])
    y = g.conv(g.qdq(x, 0.05, name="in"), 8, 16, name="conv1")
    y = g.qdq(y, 0.04, name="epilogue")  # Q/DQ between the conv and its Relu (QDQ103)
    y = g.node("Relu", [y], name="relu")
    y = g.conv(g.qdq(y, 0.04, name="mid"), 16, 16, name="conv2")
    g.output(y, [1, 16, 6, 6])
    return g.ir()


def test_repair_removes_an_epilogue_qdq_and_keeps_the_rest() -> None:
    before, after = _epilogue_qdq_model(), _epilogue_qdq_model()
    start_session(after, plan_target(after))
    changes = repair_scope(after, nodes=["epilogue_Q"])
    end_session(after)
    assert changes == ["'conv1_out': Q/DQ for [relu] -> [none]"]
    assert [n.name for n in after.graph if n.op_type == "QuantizeLinear"] == [
        n.name for n in before.graph if n.op_type == "QuantizeLinear" and n.name != "epilogue_Q"]
    # Only the Relu input is no longer rounded: close, not equal.
    want, got = run_model(before, {"x": X})[0], run_model(after, {"x": X})[0]
    assert np.abs(got - want).max() < 0.05 * 16


def test_repair_of_a_matching_scope_changes_nothing() -> None:
    model = _epilogue_qdq_model()
    start_session(model, plan_target(model))
    assert repair_scope(model, nodes=["mid_Q", "conv2"]) == []
    end_session(model)
