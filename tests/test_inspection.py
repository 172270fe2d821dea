from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from qdqkit.cli import main
from qdqkit.examples.builder import demo_network
from qdqkit.inspection import inspect_model
from tests.models import qdq_conv_model

FIXTURES = Path(__file__).parent / "fixtures"


def test_demo_network_is_fully_int8(tmp_path: Path) -> None:
    path = tmp_path / "demo.onnx"
    onnx.save(demo_network(), path)
    result = inspect_model(path)
    assert result.quantize_count == 12 and result.dequantize_count == 12
    assert result.styles["Q on weight"] == 6
    assert result.granularity == {"activation per-tensor": 12, "weight per-channel(axis=0)": 12}
    assert all(w.quantized for w in result.weighted_ops)
    assert result.int8_mac_share == 1.0
    # MACs of the stem: 16 output channels * 32*32 positions * 3*3*3 taps.
    assert result.weighted_ops[0].macs == 16 * 32 * 32 * 27


def test_modelopt_style_is_recognised(tmp_path: Path) -> None:
    path = tmp_path / "mo.onnx"
    onnx.save(demo_network("modelopt"), path)
    result = inspect_model(path)
    assert result.opsets == {"ai.onnx": 19}
    assert result.styles["DQ-only integer weight"] == 6
    assert result.scale_types["float16 scales"] == result.quantize_count + result.dequantize_count
    assert result.int8_mac_share == 1.0


def test_real_polygraphy_model_reports_uint8_zero_point() -> None:
    result = inspect_model(FIXTURES / "models" / "polygraphy_qdq_conv.onnx")
    assert result.quant_types.get("uint8", 0) >= 2
    assert result.zero_point_problems, "a non-zero uint8 zero point must be reported"
    assert any(p.tensor == "x" for p in result.zero_point_problems)
    # Only the activation goes through DQ; the Conv weight is a plain float initializer.
    conv = result.weighted_ops[0]
    assert conv.activation_quantized and conv.weight_style == "float" and not conv.quantized


def test_float_model_has_no_qdq_and_zero_int8_share() -> None:
    result = inspect_model(FIXTURES / "models" / "polygraphy_residual_block.onnx")
    assert not result.is_quantized
    assert result.int8_mac_share == 0.0


def test_partially_quantized_share_is_mac_weighted(tmp_path: Path) -> None:
    model = qdq_conv_model()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    result = inspect_model(path)
    assert result.int8_mac_share == 1.0 and result.total_macs == 4 * 8 * 8 * 27


@pytest.mark.parametrize("as_json", [False, True])
def test_cli(tmp_path: Path, as_json: bool, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "demo.onnx"
    onnx.save(demo_network(), path)
    assert main(["inspect", str(path)] + (["--json"] if as_json else [])) == 0
    stdout = capsys.readouterr().out
    if as_json:
        data = json.loads(stdout)
        assert data["quantize_count"] == 12 and data["int8_mac_share"] == 1.0
    else:
        assert "INT8 share of MACs: 100.0%" in stdout


def test_cli_bad_input_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model at all")
    assert main(["inspect", str(bad)]) == 2
    stderr = capsys.readouterr().err
    assert stderr.count("\n") == 1 and str(bad) in stderr and "Traceback" not in stderr


def test_onnxruntime_default_output_zero_points_and_reshaped_weight() -> None:
    """onnxruntime's quantize_static defaults: asymmetric int8, a MatMul weight behind a Reshape."""
    path = FIXTURES / "translate" / "mnist_ort_default.onnx"
    proto = onnx.load(path)
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in proto.graph.initializer}
    q_outputs = {n.output[0] for n in proto.graph.node if n.op_type == "QuantizeLinear"}
    # Independent count: every Q with a non-zero zero point, plus every DQ that reads an
    # initializer (a pre-quantized weight) with one; DQs fed by a Q repeat their Q's.
    expected = sum(
        1
        for n in proto.graph.node
        if n.op_type in ("QuantizeLinear", "DequantizeLinear")
        and len(n.input) > 2
        and inits[n.input[2]].any()
        and not (n.op_type == "DequantizeLinear" and n.input[0] in q_outputs)
    )
    result = inspect_model(path)
    assert len(result.zero_point_problems) == expected > 0
    matmul = next(w for w in result.weighted_ops if w.op_type == "MatMul")
    assert matmul.quantized and matmul.weight_style == "q-dq"
    assert result.int8_mac_share == 1.0


def test_counts_q_on_input_once_and_biases_as_biases(tmp_path: Path) -> None:
    import numpy as np

    from qdqkit.examples.graph import GraphBuilder

    g = GraphBuilder("bias")
    x = g.input("x", [1, 3, 8, 8])
    w = g.weight((4, 3, 1, 1), style="dq-only")
    b = g.qdq(g.const(np.linspace(-1, 1, 4).astype(np.float32), "bias"), 0.01, name="bias")
    y = g.node("Conv", [g.qdq(x, name="x"), w, b], name="conv", kernel_shape=[1, 1])
    g.output(g.qdq(y, name="y"))
    result = inspect_model(g.save(tmp_path / "m.onnx"))
    assert result.styles["Q on a graph input"] == 1
    assert result.styles["Q on activation"] == 1  # the output's Q; the input's is counted above
    assert result.styles["Q on bias"] == 1 and "Q on weight" not in result.styles
    assert result.granularity["bias per-tensor"] == 2  # the bias's Q and DQ


def test_dynamic_quantization_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import numpy as np
    from onnx import TensorProto, helper

    from qdqkit.examples.graph import GraphBuilder

    g = GraphBuilder("dyn")
    x = g.input("x", [1, 4])
    g.nodes.append(helper.make_node("DynamicQuantizeLinear", [x], ["xq", "xs", "xz"], name="dql"))
    g.node("MatMulInteger", ["xq", g.const(np.ones((4, 4), np.uint8), "w"), "xz"], name="mm",
           out="acc")
    g.node("Cast", ["acc"], name="cast", out="y", to=TensorProto.FLOAT)
    g.output("y")
    path = g.save(tmp_path / "dyn.onnx")
    assert inspect_model(path).dynamic_quantization == {"DynamicQuantizeLinear": 1,
                                                        "MatMulInteger": 1}
    assert main(["inspect", str(path)]) == 0
    text = capsys.readouterr().out
    assert "dynamic quantization" in text and "float model" not in text


def test_macs_of_dynamic_models_say_what_was_assumed(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from qdqkit.examples.graph import GraphBuilder

    g = GraphBuilder("dyn")
    x = g.input("x", ["N", 3, "H", "W"])
    g.output(g.qdq(g.conv(g.qdq(x, name="x"), 3, 4, k=1, name="c"), name="y"))
    path = g.save(tmp_path / "m.onnx")
    result = inspect_model(path)
    assert result.assumed_dims == ["x.N=1", "x.H=1", "x.W=1"]
    sized = inspect_model(path, shapes={"x": [1, 3, 16, 32]})
    assert sized.assumed_dims == [] and sized.total_macs == 16 * 32 * 4 * 3
    assert main(["inspect", str(path), "--shapes", "x:1x3x16x32"]) == 0
    assert "MACs assume" not in capsys.readouterr().out
    assert main(["inspect", str(path)]) == 0
    assert "MACs assume x.N=1, x.H=1, x.W=1" in capsys.readouterr().out
