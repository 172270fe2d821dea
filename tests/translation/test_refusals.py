"""What the translator refuses: one-line errors naming nodes or files, nothing half-written."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from qdqkit.core.errors import QdqkitError
from qdqkit.examples.graph import GraphBuilder, run_model
from qdqkit.translation import translate

FIXTURES = Path(__file__).parents[1] / "fixtures" / "translate"
NODE_TESTS = Path(__file__).parents[1] / "fixtures" / "onnx-node-tests"


def _refused(path: Path, tmp_path: Path, *needles: str) -> str:
    out = tmp_path / "out"
    with pytest.raises(QdqkitError) as info:
        translate(path, out)
    message = str(info.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message
    assert not out.exists() or not any(out.iterdir()), "nothing may be left behind"
    return message


def test_non_zero_zero_points_from_onnxruntime_defaults(tmp_path: Path) -> None:
    _refused(FIXTURES / "mnist_ort_default.onnx", tmp_path, "non-zero zero points",
             "'Input3_QuantizeLinear'", "more")


def test_per_channel_activation_scales(tmp_path: Path) -> None:
    g = GraphBuilder()
    x = g.input("x", [1, 2, 4, 4])
    g.node("Relu", [g.qdq(x, np.array([0.1, 0.2], np.float32), zero_point=np.zeros(2, np.int8),
                          axis=1, name="act")], out="y")
    g.output("y")
    _refused(g.save(tmp_path / "m.onnx"), tmp_path, "per channel", "'act_Q'")


@pytest.mark.parametrize(
    "zp_type,kind",
    [(onnx.TensorProto.INT4, "int4"), (onnx.TensorProto.FLOAT8E4M3FN, "float8e4m3fn"),
     (onnx.TensorProto.INT16, "int16"), (onnx.TensorProto.UINT16, "uint16")],
)
def test_types_implicit_int8_cannot_carry(zp_type: int, kind: str, tmp_path: Path) -> None:
    g = GraphBuilder(opset=21)
    x = g.input("x", [1, 4])
    s = g.scale(0.1)
    g.initializers.append(onnx.helper.make_tensor("zp", zp_type, [], [0]))
    q = g.node("QuantizeLinear", [x, s, "zp"], name="wide_q")
    g.node("Relu", [g.node("DequantizeLinear", [q, s, "zp"], name="wide_dq")], out="y")
    g.output("y")
    _refused(g.save(tmp_path / "m.onnx"), tmp_path, kind, "cannot carry", "'wide_q'")


def test_scales_fed_at_run_time(tmp_path: Path) -> None:
    _refused(NODE_TESTS / "test_dequantizelinear_int4" / "model.onnx", tmp_path,
             "computed at run time")


def test_a_model_without_qdq(tmp_path: Path) -> None:
    _refused(FIXTURES / "mnist.onnx", tmp_path, "no QuantizeLinear/DequantizeLinear")


def test_truncated_and_missing_files(tmp_path: Path) -> None:
    data = (FIXTURES / "torch_fq_qat.onnx").read_bytes()
    (tmp_path / "cut.onnx").write_bytes(data[: len(data) // 3])
    _refused(tmp_path / "cut.onnx", tmp_path, "cut.onnx")
    _refused(tmp_path / "absent.onnx", tmp_path, "no such file")


def _with_external_weight(tmp_path: Path, location: str) -> Path:
    model = onnx.load(FIXTURES / "torch_fq_qat.onnx")
    tensor = next(t for t in model.graph.initializer if t.name == "stem.conv.weight")
    tensor.ClearField("raw_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "1728")):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    path = tmp_path / "ext.onnx"
    onnx.save(model, path)
    return path


def test_missing_external_data(tmp_path: Path) -> None:
    _refused(_with_external_weight(tmp_path, "weights.bin"), tmp_path, "weights.bin", "missing")


def test_external_data_outside_the_model_folder(tmp_path: Path) -> None:
    (tmp_path / "secret.bin").write_bytes(b"\0" * 4096)
    folder = tmp_path / "models"
    folder.mkdir()
    path = _with_external_weight(folder, "../secret.bin")
    _refused(path, folder, "outside the model's folder")


def test_output_that_would_overwrite_the_input(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    shutil.copy(FIXTURES / "torch_fq_qat.onnx", source)
    out = tmp_path / "out"
    out.mkdir()
    (out / "m_noqdq.onnx").symlink_to(source)
    with pytest.raises(QdqkitError, match="overwrite the input"):
        translate(source, out)
    assert source.read_bytes() == (FIXTURES / "torch_fq_qat.onnx").read_bytes()
    assert sorted(p.name for p in out.iterdir()) == ["m_noqdq.onnx"]


def test_nothing_half_written_when_a_late_step_fails(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import qdqkit.translation.writer as writer

    def fail(nodes: object) -> str:
        raise QdqkitError("simulated failure while formatting the layer argument")

    monkeypatch.setattr(writer, "format_layer_precisions", fail)
    with pytest.raises(QdqkitError, match="simulated"):
        translate(FIXTURES / "torch_fq_qat.onnx", tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_polygraphy_constant_qdq_conv_translates(tmp_path: Path) -> None:
    """A Q/DQ on a constant is a weight spelling: its uint8 zero points do not matter."""
    result = translate(Path(__file__).parents[1] / "fixtures/models/polygraphy_qdq_conv.onnx",
                       tmp_path)
    model = onnx.load(result.outputs.noqdq_model)
    assert run_model(model, {})[0].shape == (1, 3, 1, 128)
    assert [n.op_type for n in model.graph.node] == ["Conv"] and result.activation_scales == 0


def test_polygraphy_weightless_model_is_refused(tmp_path: Path) -> None:
    _refused(Path(__file__).parents[1] / "fixtures/models/polygraphy_weightless_qdq_conv.onnx",
             tmp_path, "polygraphy_weightless_qdq_conv.onnx")


def test_qdq_inside_an_if_body_is_refused(tmp_path: Path) -> None:
    body = GraphBuilder("branch")
    s = body.scale(0.1)
    q = body.node("QuantizeLinear", ["x", s], name="inner_q")
    body.node("DequantizeLinear", [q, s], name="inner_dq", out="branch_out")
    body.output("branch_out")
    branch = body.graph()
    g = GraphBuilder()
    g.input("x", [1, 4])
    cond = g.const(np.array(True), "cond")
    outer_q = g.qdq("x", 0.1)
    g.node("If", [cond], name="if", out="y", then_branch=branch, else_branch=branch)
    g.node("Relu", [outer_q], out="z")
    g.output("y")
    g.output("z")
    _refused(g.save(tmp_path / "m.onnx"), tmp_path, "If 'if'", "'inner_q'")
