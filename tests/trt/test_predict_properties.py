"""Invariants of the predictor on random Q/DQ graphs (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from qdqkit.examples.graph import GraphBuilder
from qdqkit.linting import lint
from qdqkit.trt.engine import Precision
from tests.models import every_node_is_accounted_for

_STEPS = ("conv", "relu", "bn", "silu", "maxpool", "avgpool", "residual", "concat", "reshape",
          "pad", "transpose", "resize", "scale", "selfadd", "split")


def _build(steps: list[tuple[str, bool, int]]) -> GraphBuilder:
    """A chain of ``steps``; each may be followed by Q/DQ with one of three scales."""
    g = GraphBuilder()
    x = g.input("x", [1, 32, 8, 8])
    for op, quantize, scale_index in steps:
        if op == "conv":
            x = g.conv(x, 32, 32)
        elif op == "relu":
            x = g.node("Relu", [x])
        elif op == "bn":
            x = g.bn(x, 32)
        elif op == "silu":
            x = g.node("Mul", [x, g.node("Sigmoid", [x])])
        elif op == "maxpool":
            x = g.node("MaxPool", [x], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        elif op == "avgpool":
            x = g.node("AveragePool", [x], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        elif op == "residual":
            x = g.node("Add", [g.conv(x, 32, 32), x])
        elif op == "concat":
            x = g.conv(g.node("Concat", [x, g.node("Relu", [x])], axis=1), 64, 32, k=1)
        elif op == "reshape":
            x = g.node("Reshape", [g.node("Reshape", [x, g.const(np.array([1, 32, 64], np.int64))]),
                                 g.const(np.array([1, 32, 8, 8], np.int64))])
        elif op == "pad":
            x = g.node("Pad", [x, g.const(np.array([0, 0, 0, 0, 0, 0, 0, 0], np.int64))])
        elif op == "transpose":
            x = g.node("Transpose", [g.node("Transpose", [x], perm=[0, 1, 3, 2])], perm=[0, 1, 3, 2])
        elif op == "resize":
            x = g.node("MaxPool", [g.node("Resize", [x, "", g.const(np.array([1, 1, 2, 2], np.float32))],
                                      mode="nearest")], kernel_shape=[2, 2], strides=[2, 2])
        elif op == "scale":
            x = g.node("Mul", [x, g.const(np.array(0.5, np.float32))])
        elif op == "selfadd":
            x = g.node("Add", [x, x])
        else:
            halves = g.node("Split", [x], outputs=2, axis=1)
            x = g.node("Concat", [halves, halves.replace("out0", "out1")], axis=1)
        if quantize:
            x = g.qdq(x, (0.05, 0.1, 0.2)[scale_index])
    g.output(x)
    return g


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_STEPS), st.booleans(), st.integers(0, 2)),
                min_size=1, max_size=10))
def test_random_graphs_are_fully_predicted(steps: list[tuple[str, bool, int]]) -> None:
    g = _build(steps)
    assert every_node_is_accounted_for(g.ir()) == []
    result = lint(g.ir())
    engine = result.engine
    qdq_nodes = sum(1 for n in g.nodes if n.op_type in ("QuantizeLinear", "DequantizeLinear"))
    # Every Q/DQ Reformat comes from a Q/DQ node (a requantize may pair a Q with a DQ).
    assert len(engine.qdq_reformats()) <= qdq_nodes
    for layer in engine.layers:
        if layer.precision == Precision.INT8 and not layer.is_reformat:
            assert layer.inputs, layer.name
        for tensor in (*layer.inputs, *layer.outputs):
            assert tensor.precision in (Precision.INT8, Precision.FP16, Precision.FP32), layer.name
    # The network output keeps its ONNX type (E7).
    assert [t.precision for t in engine.outputs] == [Precision.FP32]
