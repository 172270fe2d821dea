"""``fix`` on Q/DQ parameters TensorRT cannot build as they are (NNCF's spellings), on weights in
Constant nodes, and on inputs with symbolic dimensions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx_ir as ir
import pytest
from onnx import numpy_helper

from qdqkit.cli import main
from qdqkit.core.qdq import QdqView
from qdqkit.examples.graph import GraphBuilder, run_model
from qdqkit.fixing import fix
from qdqkit.linting import lint

CHANNELS = 8
SCALES = np.linspace(0.01, 0.04, CHANNELS).astype(np.float32)


def _depthwise_after(producer: str, zp_dtype: type, per_channel: bool,
                     batch: int | str = 1) -> ir.Model:
    """conv -> ``producer`` -> Q/DQ (``zp_dtype`` zero point 0, per channel or not) ->
    depthwise conv -> conv: NNCF quantizes a depthwise conv's input this way."""
    g = GraphBuilder("nncf_style", seed=1)
    x = g.input("x", [batch, CHANNELS, 8, 8])
    y = g.conv(g.qdq(x, 0.05), CHANNELS, CHANNELS, name="c1")
    y = g.node(producer, [y], name="act")
    scale = SCALES if per_channel else np.float32(SCALES.max())
    axis = 1 if per_channel else None
    y = g.dequantize(g.quantize(y, scale, 0, name="act_q", axis=axis, zp_dtype=zp_dtype),
                     scale, 0, name="act_dq", axis=axis, zp_dtype=zp_dtype)
    y = g.conv(y, CHANNELS, CHANNELS, group=CHANNELS, name="dw")
    y = g.conv(g.qdq(g.node("Relu", [y]), 0.05), CHANNELS, CHANNELS, name="c2")
    g.output(y)
    return g.ir()


def _act_qdq(model: ir.Model) -> tuple[np.ndarray, ir.DataType]:
    """The scale and type of the Q now quantizing the depthwise conv's input."""
    view = QdqView(model.graph)
    act = next(n for n in model.graph if n.name == "act")
    q = next(u.node for u in act.outputs[0].uses() if u.node.op_type == "QuantizeLinear")
    params = view.params(q)
    assert params is not None
    return params.scale.reshape(-1), params.quant_dtype


def _feeds(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((1, CHANNELS, 8, 8)).astype(np.float32)}


def _fixed_by(code: str, model: ir.Model) -> tuple[ir.Model, np.ndarray, ir.DataType]:
    """``model`` fixed, where ``code`` fired before, is fixed and fires no more; the scale and
    type of the Q now quantizing the depthwise conv's input."""
    assert code in lint(model).codes()
    result = fix(model)
    fixed = result.model
    assert fixed is not None and code in result.by_rule()
    assert code not in lint(fixed).codes()
    return fixed, *_act_qdq(fixed)


def test_a_per_channel_activation_gets_its_widest_channels_scale_per_tensor() -> None:
    fixed, scale, dtype = _fixed_by("QDQ401", _depthwise_after("Relu", np.int8, per_channel=True))
    # One INT8 scale covering every channel's range: nothing clipped that was not before.
    assert scale.tolist() == [float(SCALES.max())] and dtype == ir.DataType.INT8
    for seed in range(2):  # onnxruntime runs the result
        assert np.all(np.isfinite(run_model(fixed, _feeds(seed))[0]))


def test_uint8_from_zero_after_relu_becomes_int8_over_the_same_range() -> None:
    _, scale, dtype = _fixed_by("QDQ412", _depthwise_after("Relu", np.uint8, per_channel=False))
    old = float(SCALES.max())
    assert dtype == ir.DataType.INT8
    assert scale[0] == np.float32(old * 255 / 127)
    # The int8 pair represents the uint8 range [0, 255 x old]: its top value round-trips
    # through onnxruntime, where TensorRT reading the uint8 pair as int8 would clip at 127 x old.
    g = GraphBuilder("pair")
    x = g.input("x", [1, 4])
    g.output(g.dequantize(g.quantize(x, float(scale[0]), 0), float(scale[0]), 0))
    top = np.array([[0.0, 100 * old, 200 * old, 255 * old]], np.float32)
    back = run_model(g.ir(), {"x": top})[0]
    assert np.max(np.abs(back - top)) <= scale[0] / 2 + 1e-7


def test_uint8_on_a_tensor_that_can_be_negative_is_left_with_its_reason() -> None:
    model = _depthwise_after("Identity", np.uint8, per_channel=False)
    result = fix(model, rules=["QDQ412"])
    assert [u.code for u in result.unfixed] == ["QDQ412"]
    assert "clamps" in result.unfixed[0].reason and result.exit_code == 1
    _, dtype = _act_qdq(result.model or model)
    assert dtype == ir.DataType.UINT8


def test_a_symbolic_input_is_not_weighed_without_shapes() -> None:
    # A finding fix leaves makes it weigh Reformats against INT8 savings: a 1 for the symbolic
    # batch would time a toy.
    model = _depthwise_after("Identity", np.uint8, per_channel=False, batch="N")
    unshaped = fix(model)
    assert "'x' has symbolic dimensions" in unshaped.unweighed and not unshaped.unpaid_float
    shaped = fix(model, shapes={"x": (1, CHANNELS, 8, 8)})
    assert shaped.unweighed == ""


def test_a_weight_in_a_constant_node_is_quantized_in_place() -> None:
    g = GraphBuilder("constant_weight", seed=2)
    x = g.qdq(g.input("x", [1, 4, 8, 8]), 0.05)
    rng = np.random.default_rng(2)
    w = rng.normal(0, 0.2, (4, 4, 3, 3)).astype(np.float32)
    weight = g.node("Constant", [], name="w_const", value=numpy_helper.from_array(w))
    y = g.node("Conv", [x, weight], name="conv", pads=[1, 1, 1, 1])
    g.output(g.node("Relu", [y], name="relu"))
    model = g.ir()
    assert "QDQ101" in lint(model).codes()
    fixed = fix(model).model
    assert fixed is not None
    codes = lint(fixed).codes()
    assert "QDQ101" not in codes and "QDQ102" not in codes
    feeds = {"x": rng.standard_normal((1, 4, 8, 8)).astype(np.float32)}
    ref, out = run_model(model, feeds)[0], run_model(fixed, feeds)[0]
    assert np.max(np.abs(ref - out)) < 0.05 * np.max(np.abs(ref))


def test_the_command_line_takes_shapes_for_the_weighing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nncf_style.onnx"
    ir.save(_depthwise_after("Identity", np.uint8, per_channel=False, batch="N"), path)
    out = tmp_path / "fixed.onnx"
    assert main(["fix", str(path), "-o", str(out)]) == 1  # the uint8 clamp is left
    assert "not weighed: input 'x' has symbolic dimensions" in capsys.readouterr().out
    assert main(["fix", str(path), "-o", str(out), "--shapes", "x:1x8x8x8", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["unweighed"] is None
