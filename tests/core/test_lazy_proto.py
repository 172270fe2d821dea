"""Large weights: loaded as references into the file and streamed on save, same model either way."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import numpy_helper

from qdqkit.core import lazy_proto
from qdqkit.core.atomic import output_set
from qdqkit.core.errors import ModelLoadError
from qdqkit.core.model_io import load_model, stage_model
from qdqkit.examples.graph import GraphBuilder


@pytest.fixture(autouse=True)
def _lazy_even_for_small_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lazy_proto, "LAZY_FILE_BYTES", 0)


def _model(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    big = rng.normal(size=(512, 600)).astype(np.float32)  # 1.2 MB: above the threshold
    small = rng.normal(size=(600,)).astype(np.float32)
    g = GraphBuilder()
    m = g.node("MatMul", [g.input("x", [2, 512]), g.const(big, "big")], name="", out="m")
    g.node("Add", [m, g.const(small, "small")], name="", out="y")
    g.output("y", [2, 600])
    return g.save(tmp_path / "m.onnx")


def test_lazy_load_maps_only_large_tensors(tmp_path: Path) -> None:
    path = _model(tmp_path)
    model = load_model(path, lazy_weights=True)
    big = model.graph.initializers["big"].const_value
    assert isinstance(big, ir.ExternalTensor) and big.location == "m.onnx"
    assert not isinstance(model.graph.initializers["small"].const_value, ir.ExternalTensor)
    reference = onnx.numpy_helper.to_array(
        next(t for t in onnx.load(path).graph.initializer if t.name == "big"))
    assert np.array_equal(big.numpy(), reference)


def test_streamed_save_is_the_same_model(tmp_path: Path) -> None:
    path = _model(tmp_path)
    model = load_model(path, lazy_weights=True)
    with output_set((path,)) as outputs:
        stage_model(outputs, model, tmp_path / "out.onnx")
    saved = onnx.load(tmp_path / "out.onnx")
    onnx.checker.check_model(saved)
    original = onnx.load(path)
    assert [t.name for t in saved.graph.initializer] == ["small", "big"]
    for tensor in original.graph.initializer:
        again = next(t for t in saved.graph.initializer if t.name == tensor.name)
        assert np.array_equal(numpy_helper.to_array(again), numpy_helper.to_array(tensor))
    assert [n.op_type for n in saved.graph.node] == ["MatMul", "Add"]


def test_in_memory_large_tensors_stream_too() -> None:
    graph = ir.Graph([], [], nodes=[], name="g")
    value = ir.Value(name="w", const_value=ir.Tensor(np.arange(300_000, dtype=np.float32)))
    graph.register_initializer(value)
    model = ir.Model(graph, ir_version=8)
    buffer = io.BytesIO()
    lazy_proto.write_streaming(model, buffer)
    proto = onnx.ModelProto.FromString(buffer.getvalue())
    assert np.array_equal(numpy_helper.to_array(proto.graph.initializer[0]), np.arange(300_000))


def test_varints_round_trip() -> None:
    for value in (0, 1, 127, 128, 300, 2**31, 2**63 - 1):
        encoded = lazy_proto.encode_varint(value)
        assert lazy_proto._varint(encoded, 0, len(encoded)) == (value, len(encoded))


def test_truncated_large_model_is_refused(tmp_path: Path) -> None:
    path = _model(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 1000])
    with pytest.raises(ModelLoadError, match=r"m\.onnx"):
        load_model(path, lazy_weights=True)
