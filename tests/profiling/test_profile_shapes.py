"""profile on a model with symbolic input dimensions: MACs and bytes are those of the fed shapes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from qdqkit.cli import main
from qdqkit.core.errors import QdqkitError
from qdqkit.profiling import profile_model

BATCH, HEIGHT, WIDTH = 2, 40, 64
# conv1: 3 -> 8 channels, 3x3, stride 2, pad 1: out = (in + 2 - 3) // 2 + 1; conv2: 8 -> 16, 1x1.
OUT_H, OUT_W = (HEIGHT - 1) // 2 + 1, (WIDTH - 1) // 2 + 1
CONV1_MACS = BATCH * 8 * OUT_H * OUT_W * (3 * 3 * 3)
CONV2_MACS = BATCH * 16 * OUT_H * OUT_W * 8
RELU_BYTES = 2 * BATCH * 8 * OUT_H * OUT_W * 4  # reads and writes one fp32 tensor


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """x[N,3,H,W] -> conv1 -> relu -> conv2, with the symbolic intermediate shapes exporters
    store (they must not make the dynamic dimensions count as 1)."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.normal(size=(8, 3, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.normal(size=(16, 8, 1, 1)).astype(np.float32), "w2")
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", strides=[2, 2],
                         pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2"], ["y"], name="conv2", kernel_shape=[1, 1]),
    ]
    stored = [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N", 8, "h", "w"])
              for name in ("c1", "r1")]
    graph = helper.make_graph(
        nodes, "dynamic", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                         ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16, "h", "w"])],
        [w1, w2], value_info=stored)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    proto.ir_version = 8
    onnx.checker.check_model(proto, full_check=True)
    path = tmp_path_factory.mktemp("dynamic") / "dynamic.onnx"
    onnx.save(proto, path)
    return path


def _by_name(nodes: list[dict]) -> dict[str, dict]:
    return {n["name"]: n for n in nodes}


def test_the_hand_counted_output_shape_is_what_onnxruntime_computes(model: Path) -> None:
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    x = np.zeros((BATCH, 3, HEIGHT, WIDTH), np.float32)
    assert session.run(["y"], {"x": x})[0].shape == (BATCH, 16, OUT_H, OUT_W)


def test_shapes_size_the_random_batch_and_its_macs(model: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", str(model), "--runs", "1", "--json",
                 "--shapes", f"x:{BATCH}x3x{HEIGHT}x{WIDTH}"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["batch"] == BATCH
    nodes = _by_name(result["nodes"])
    assert nodes["conv1"]["macs"] == CONV1_MACS
    assert nodes["conv2"]["macs"] == CONV2_MACS
    assert nodes["relu1"]["bytes"] == RELU_BYTES
    conv = next(o for o in result["op_types"] if o["op_type"] == "Conv")
    assert conv["macs"] == CONV1_MACS + CONV2_MACS


def test_real_data_counts_macs_at_its_own_shape(model: Path, tmp_path: Path) -> None:
    data = tmp_path / "x.npy"
    np.save(data, np.random.default_rng(1).normal(size=(BATCH, 3, HEIGHT, WIDTH))
            .astype(np.float32))
    result = profile_model(model, data, runs=1, batch=BATCH)  # a dynamic batch defaults to 1
    assert result.batch == BATCH
    nodes = {n.name: n for n in result.nodes}
    assert (nodes["conv1"].macs, nodes["conv2"].macs) == (CONV1_MACS, CONV2_MACS)
    assert nodes["relu1"].bytes == RELU_BYTES


def test_shapes_with_a_data_file_or_a_wrong_input_are_refused(
        model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 8, 8), np.float32))
    assert main(["profile", str(model), "--data", str(tmp_path / "x.npy"),
                 "--shapes", "x:1x3x8x8"]) == 2
    assert "--shapes" in capsys.readouterr().err
    with pytest.raises(QdqkitError, match="image"):
        profile_model(model, shapes={"image": (1, 3, 8, 8)}, runs=1)
