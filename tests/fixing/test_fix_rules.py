"""Each fixable rule the producer models do not cover, on a small model: the finding is there
before ``fix`` and gone after, for the GPU and for DLA, with the outputs kept."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx_ir as ir
import pytest

from qdqkit.core.numerics import error_metrics
from qdqkit.examples.graph import GraphBuilder, run_model
from qdqkit.fixing import fix
from qdqkit.linting import lint


def _stem(g: GraphBuilder) -> str:
    x = g.input("x", [1, 32, 16, 16])
    return g.node("Relu", [g.conv(g.qdq(x, 0.05, name="in"), 32, 32, name="c0")], name="r0")


def qdq_between_pad_and_conv() -> ir.Model:
    g = GraphBuilder("pad", seed=1)
    pads = g.const(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))
    p = g.node("Pad", [_stem(g), pads], name="pad")
    y = g.node("Conv", [g.qdq(p, 0.05, name="padq"), g.weight((32, 32, 3, 3), name="w1")],
               name="c1", kernel_shape=[3, 3])
    g.output(g.node("Relu", [y], name="r1"))
    return g.ir()


def maxpool_scale_mismatch() -> ir.Model:
    g = GraphBuilder("maxpool", seed=2)
    y = g.node("MaxPool", [g.qdq(_stem(g), 0.04, name="before")], name="mp", kernel_shape=[2, 2],
               strides=[2, 2])
    g.output(g.node("Relu", [g.conv(g.qdq(y, 0.06, name="after"), 32, 32, name="c1")]))
    return g.ir()


def several_q_on_one_tensor() -> ir.Model:
    g = GraphBuilder("several", seed=3)
    y = _stem(g)
    a = g.conv(g.qdq(y, 0.04, name="qa"), 32, 32, name="ca")
    b = g.conv(g.qdq(y, 0.05, name="qb"), 32, 32, name="cb")
    g.output(g.node("Add", [g.node("Relu", [a]), g.node("Relu", [b])], name="add"))
    return g.ir()


def quantized_biases() -> ir.Model:
    """Two convs, one bias Q/DQ'd (int8), the other an int32 initializer behind a DQ."""
    g = GraphBuilder("bias", seed=4)
    y = _stem(g)
    bias = g.rng.normal(0, 0.1, 32).astype(np.float32)
    b1 = g.qdq(g.const(bias, "c1.bias"), float(np.abs(bias).max() / 127), name="b1")
    y = g.node("Conv", [g.qdq(y, 0.05, name="q1"), g.weight((32, 32, 3, 3), name="w1"), b1],
               name="c1", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    scale = np.full(32, 0.05 * 0.002, np.float32)
    b2 = g.dequantize(g.const(np.rint(bias / scale).astype(np.int32), "c2.bias"), scale,
                      np.zeros(32, np.int32), zp_dtype=np.int32, axis=0, name="b2_DQ")
    y = g.node("Conv", [g.qdq(g.node("Relu", [y]), 0.05, name="q2"),
                        g.weight((32, 32, 3, 3), name="w2"), b2],
               name="c2", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    g.output(g.node("Relu", [y], name="r2"))
    return g.ir()


def weighted_op_not_quantized() -> ir.Model:
    """One of two convs reading a quantized tensor reads it float, weight float too."""
    g = GraphBuilder("unquantized", seed=4)
    y = _stem(g)
    a = g.conv(g.qdq(y, 0.04, name="qa"), 32, 32, name="ca")
    b = g.node("Conv", [y, g.weight((32, 32, 3, 3), style="float", name="wb")], name="cb",
               kernel_shape=[3, 3], pads=[1] * 4)
    g.output(g.node("Add", [g.node("Relu", [a]), g.node("Relu", [b])], name="add"))
    return g.ir()


def int8_in_float_out() -> ir.Model:
    """A pooled head: Q/DQ in front of the average pool, nothing INT8 after it."""
    g = GraphBuilder("pooled", seed=5)
    y = g.node("GlobalAveragePool", [g.qdq(_stem(g), 0.04, name="gap_in")], name="gap")
    y = g.node("Flatten", [y], name="flat")
    g.output(g.node("Gemm", [y, g.weight((10, 32), style="float", name="fc_w")], name="fc", transB=1))
    return g.ir()


def qdq_inside_pointwise() -> ir.Model:
    """A HardSwish spelled x * Clip(x + 3, 0, 6) / 6 after a depthwise conv (which takes no
    pointwise epilogue, so the HardSwish is a PointWise layer of its own), with a Q/DQ on the
    Clip's output, as onnxruntime's quantizer leaves it (every op's output quantized)."""
    g = GraphBuilder("hardswish", seed=7)
    y = g.qdq(g.conv(g.qdq(_stem(g), 0.05, name="q1"), 32, 32, group=32, name="c1"), 0.2,
              name="y")
    three, zero, six = (g.const(np.array(v, np.float32)) for v in (3.0, 0.0, 6.0))
    gate = g.node("Clip", [g.node("Add", [y, three], name="add3"), zero, six], name="clip")
    out = g.node("Div", [g.node("Mul", [y, g.qdq(gate, 6 / 127, name="gate")], name="mul"), six],
                 name="div")
    g.output(g.node("Relu", [g.conv(g.qdq(out, 0.2, name="q2"), 32, 32, name="c2")], name="r2"))
    return g.ir()


CASES: dict[str, tuple[Callable[[], ir.Model], str]] = {
    "pointwise": (qdq_inside_pointwise, "QDQ206"),
    "bias": (quantized_biases, "QDQ409"),
    "pad": (qdq_between_pad_and_conv, "QDQ107"),
    "maxpool": (maxpool_scale_mismatch, "QDQ303"),
    "several": (several_q_on_one_tensor, "QDQ404"),
    "unquantized": (weighted_op_not_quantized, "QDQ102"),
    "pooled": (int8_in_float_out, "QDQ205"),
}


# On DLA a Q/DQ inside a pointwise chain is a range the translation needs: it belongs there.
GPU_ONLY = {"pointwise"}


@pytest.mark.parametrize(("case", "target"), [
    (case, target) for case in sorted(CASES) for target in ("gpu", "dla")
    if target == "gpu" or case not in GPU_ONLY])
def test_the_finding_goes_and_the_outputs_stay(case: str, target: str) -> None:
    build, code = CASES[case]
    model = build()
    assert code in lint(model, target=target).codes()
    result = fix(model, target=target)
    assert result.model is not None and result.unfixed == []
    assert code not in lint(result.model, target=target).codes()
    x = {"x": np.random.default_rng(0).standard_normal((1, 32, 16, 16)).astype(np.float32)}
    snr = error_metrics(run_model(model, x)[0], run_model(result.model, x)[0]).snr_db
    assert snr >= 30.0


def test_weights_in_constant_nodes_stay_int8_through_fix() -> None:
    """paddle2onnx stores every weight in a Constant node, and onnxruntime's quantizer then puts
    Q/DQ after it: fix reads such a weight as stored, so its convs keep INT8."""
    from qdqkit.core.qdq import is_dequantize

    model = qdq_inside_pointwise()
    graph = model.graph
    for node in [n for n in graph if n.op_type == "Conv"]:
        q = node.inputs[1].producer().inputs[0].producer()  # float weight -> Q -> DQ -> conv
        weight = q.inputs[0]
        assert weight is not None and weight.const_value is not None
        constant = ir.Node("", "Constant", [], attributes=[
            ir.AttrTensor("value", weight.const_value)], name=f"{node.name}_w_const")
        graph.insert_before(q, constant)
        out = constant.outputs[0]
        out.name = f"{node.name}_w_node"
        q.replace_input_with(0, out)
    before = lint(model)
    assert before.summary.int8_mac_share == 1.0
    result = fix(model)
    assert result.model is not None
    after = lint(result.model)
    assert after.summary.int8_mac_share == 1.0 and "QDQ206" not in after.codes()
    convs = [n for n in result.model.graph if n.op_type == "Conv"]
    assert all((p := n.inputs[0].producer()) is not None and is_dequantize(p) for n in convs)


def test_the_quantized_bias_fix_repairs_the_finding_it_is_given() -> None:
    from qdqkit.rules import units

    model = quantized_biases()
    first, second = lint(model).findings("QDQ409")
    (unit,) = [u for u in units() if "QDQ409" in [r.code for r in u.rules]]
    assert unit.fix is not None and unit.fix(first, model)
    assert [f.nodes for f in lint(model).findings("QDQ409")] == [second.nodes]
    assert unit.fix(second, model) and not unit.fix(second, model)  # nothing left to repair
    assert lint(model).findings("QDQ409") == []
    floats = [n.inputs[2] for n in model.graph if n.op_type == "Conv" and len(n.inputs) > 2]
    assert all(v is not None and v.const_value is not None
               and v.const_value.dtype == ir.DataType.FLOAT for v in floats)


def test_qdqkit_fix_on_the_command_line_removes_quantized_biases(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from qdqkit.cli import main

    source, out = tmp_path / "bias.onnx", tmp_path / "fixed.onnx"
    ir.save(quantized_biases(), source)
    assert main(["lint", str(source), "--json"]) in (0, 1)
    assert "QDQ409" in capsys.readouterr().out
    assert main(["fix", str(source), "-o", str(out), "--rules", "QDQ409"]) == 0
    capsys.readouterr()
    assert "QDQ409" not in lint(ir.load(out)).codes()
    x = {"x": np.random.default_rng(0).standard_normal((1, 32, 16, 16)).astype(np.float32)}
    np.testing.assert_array_equal(run_model(source, x)[0], run_model(out, x)[0])


def test_keep_float_takes_listed_nodes_out_of_int8_and_keeps_them_there(tmp_path: Path) -> None:
    """`fix --keep-float FILE` reads the list `compare --fallback` writes (one name per line)."""
    from qdqkit.cli import main
    from qdqkit.core.qdq import is_dequantize

    g = GraphBuilder("fallback", seed=6)
    y = g.node("Relu", [g.conv(g.qdq(_stem(g), 0.05, name="q1"), 32, 32, name="c1")], name="r1")
    y = g.node("Relu", [g.conv(g.qdq(y, 0.05, name="q2"), 32, 32, name="c2")], name="r2")
    g.output(y)
    source = tmp_path / "model.onnx"
    ir.save(g.ir(), source)
    listed = tmp_path / "fallback.txt"
    listed.write_text("# largest output gain first\nc1\n")
    out = tmp_path / "fixed.onnx"
    assert main(["fix", str(source), "-o", str(out), "--keep-float", str(listed)]) == 0
    fixed = ir.load(out)
    c1 = next(n for n in fixed.graph if n.name == "c1")
    c2 = next(n for n in fixed.graph if n.name == "c2")
    reads_dq = [v is not None and (p := v.producer()) is not None and is_dequantize(p)
                for v in c1.inputs[:2]]
    assert reads_dq == [False, False]  # activation and weight both float now
    assert c2.inputs[0].producer() is not None and is_dequantize(c2.inputs[0].producer())
    # Nothing re-quantizes c1, and the model computes what it did up to quantization error.
    assert not [f for f in lint(fixed).findings("QDQ102") if "c1" not in f.message]
    feed = {"x": np.random.default_rng(0).normal(size=(1, 32, 16, 16)).astype(np.float32)}
    snr = error_metrics(run_model(g.ir(), feed)[0], run_model(fixed, feed)[0]).snr_db
    assert snr >= 30
    listed.write_text("no_such_node\n")
    assert main(["fix", str(source), "-o", str(tmp_path / "x.onnx"), "--keep-float",
                 str(listed)]) == 2
