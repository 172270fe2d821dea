"""The read-through copy the FP16 baseline is predicted from equals the clone with its pairs removed
(``remove_qdq_pairs``, the in-place way), serialized byte for byte, and leaves the model as it was."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from qdqkit.core.read_through import read_through_qdq, remove_qdq_pairs
from qdqkit.examples.graph import GraphBuilder
from qdqkit.examples.resnet import resnet18_qdq
from tests.fixing import producers

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _file(relative: str) -> Callable[[], ir.Model]:
    return lambda: ir.load(FIXTURES / relative)


def _chains() -> ir.Model:
    # Q -> DQ -> Q -> DQ, a DQ that is a graph output, a Q read by a non-DQ too, a stored INT8
    # weight's DQ without a Q, and a Q/DQ pair whose DQ nobody reads.
    b = GraphBuilder("chains")
    x = b.input("x", [1, 4, 8, 8])
    s = b.const(np.float32(0.05), "s")
    z = b.const(np.int8(0), "z")
    q1 = b.node("QuantizeLinear", [x, s, z], name="q1")
    d1 = b.node("DequantizeLinear", [q1, s, z], name="d1")
    q2 = b.node("QuantizeLinear", [d1, s, z], name="q2")
    d2 = b.node("DequantizeLinear", [q2, s, z], name="d2")
    w = b.const(np.ones((4, 4, 1, 1), np.int8), "w")
    ws = b.const(np.full(4, 0.01, np.float32), "ws")
    wd = b.node("DequantizeLinear", [w, ws], name="wd", axis=0)
    conv = b.node("Conv", [d2, wd], name="conv")
    q3 = b.node("QuantizeLinear", [conv, s, z], name="q3")
    d3 = b.node("DequantizeLinear", [q3, s, z], name="d3")
    cast = b.node("Cast", [q3], name="cast", to=onnx.TensorProto.FLOAT)
    q4 = b.node("QuantizeLinear", [conv, s, z], name="q4")
    b.node("DequantizeLinear", [q4, s, z], name="unread")
    b.output(d3)
    b.output(cast)
    return b.ir()


@pytest.mark.parametrize("build", [
    _chains,
    lambda: ir.serde.deserialize_model(resnet18_qdq()),
    _file("translate/ultraface_ort_qdq.onnx"),
    _file("translate/mnist_ort_qdq_wqdq.onnx"),
    _file("translate/torch_fq_qat.onnx"),
    _file("models/vit_tiny_random_qdq.onnx"),
    producers.modelopt, producers.nncf, producers.ppq, producers.tf_qat,
], ids=["chains", "resnet18", "ultraface", "mnist_wqdq", "torch_fq", "vit", "modelopt", "nncf",
        "ppq", "tf_qat"])
def test_reading_through_equals_the_clone_with_its_pairs_removed(
    build: Callable[[], ir.Model],
) -> None:
    model = build()
    before = ir.serde.serialize_model(model).SerializeToString()
    expected = model.clone()
    remove_qdq_pairs(expected.graph)
    copied = read_through_qdq(model)
    assert ir.serde.serialize_model(model).SerializeToString() == before
    assert (ir.serde.serialize_model(copied).SerializeToString()
            == ir.serde.serialize_model(expected).SerializeToString())
    assert len(copied.graph) < len(model.graph)


def test_the_chains_read_the_first_float_tensor_and_keep_what_is_still_read() -> None:
    copied = read_through_qdq(_chains())
    names = [node.name for node in copied.graph]
    # q3 stays for the Cast, d3 for the graph output; the weight's DQ stays (no Q before it).
    assert names == ["wd", "conv", "q3", "d3", "cast"]
    conv = next(node for node in copied.graph if node.name == "conv")
    assert conv.inputs[0] is copied.graph.inputs[0]
