"""MACs of recurrent layers: every step multiplies the input by W and the hidden state by R, for
each gate and direction (the counts below are worked out by hand from the ONNX operator spec)."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from onnx import TensorProto, helper, numpy_helper

from qdqkit.core.macs import macs_of
from qdqkit.core.shapes import infer_value_types


def _recurrent(op: str, gates: int, *, layout: int, directions: int) -> ir.Model:
    seq, batch, inputs, hidden = 5, 2, 3, 4
    x_shape = [batch, seq, inputs] if layout else [seq, batch, inputs]
    w = np.zeros((directions, gates * hidden, inputs), np.float32)
    r = np.zeros((directions, gates * hidden, hidden), np.float32)
    node = helper.make_node(op, ["x", "w", "r"], ["y"], name="rnn", hidden_size=hidden,
                            layout=layout,
                            direction="bidirectional" if directions == 2 else "forward")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(r, "r")])
    return ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]))


def _macs(model: ir.Model) -> int | None:
    types = infer_value_types(model)
    return macs_of(next(iter(model.graph)), shape_of=types.shape_of)


def test_lstm_gru_and_rnn_count_every_step_gate_and_direction() -> None:
    # 5 steps x 2 samples x directions x gates x hidden 4 x (input 3 + hidden 4)
    assert _macs(_recurrent("LSTM", 4, layout=0, directions=2)) == 5 * 2 * 2 * 4 * 4 * 7
    assert _macs(_recurrent("GRU", 3, layout=1, directions=1)) == 5 * 2 * 1 * 3 * 4 * 7
    assert _macs(_recurrent("RNN", 1, layout=0, directions=1)) == 5 * 2 * 1 * 1 * 4 * 7



def _matmul_macs(shape: list[int | str]) -> int | None:
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "w"], ["y"], name="mm")], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.zeros((120, 16), np.float32), "w")])
    model = ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]))
    return macs_of(next(iter(model.graph)), shape_of=infer_value_types(model).shape_of)


def test_a_dimension_inference_made_up_counts_as_a_batch_only_in_front() -> None:
    """MatMul [b, 40, 120] x [120, 16]: 40 x 120 x 16 per sample, whatever b is. A size ONNX
    inference could not know (``unk__N``) anywhere else leaves the layer unsized."""
    assert _matmul_macs(["unk__0", 40, 120]) == 40 * 120 * 16
    assert _matmul_macs(["batch", 40, 120]) == 40 * 120 * 16
    assert _matmul_macs([1, "unk__3", 120]) is None
