"""Lint rules that judged real placements wrongly: each fix has a trigger and its clean twin.

Decomposed LayerNorm means are no pools (QDQ304); a float skip costs nothing when nothing after the
block is INT8 (QDQ201); a Q/DQ shared by several readers breaks no residual fusion (QDQ202, B7); a
weighted op kept float because INT8 would not pay for its Q is not reported (QDQ102); a Q after
float math through copies is the ops' own Reformat (QDQ407).
"""

from __future__ import annotations

import numpy as np

from qdqkit.examples.graph import GraphBuilder
from qdqkit.linting import lint


def _codes(g: GraphBuilder, trt: str = "8.6") -> set[str]:
    return set(lint(g.ir(), trt=trt).codes())


def _linear(g: GraphBuilder, x: str, cin: int, cout: int) -> str:
    w = g.rng.normal(0, 1 / np.sqrt(cin), (cin, cout)).astype(np.float32)
    return g.node("MatMul", [g.qdq(x, 0.05), g.qdq(g.const(w), float(np.abs(w).max() / 127))])


def _mean_between_int8(layernorm: bool) -> GraphBuilder:
    """INT8 layer -> ReduceMean -> INT8 layer: a LayerNorm over tokens, or a spatial pool."""
    g = GraphBuilder()
    if layernorm:
        y = _linear(g, g.input("x", [1, 16, 32]), 32, 32)  # tokens [1, T, C]
        mean = g.node("ReduceMean", [y], axes=[-1])
        centered = g.node("Sub", [y, mean])
        var = g.node("ReduceMean", [g.node("Pow", [centered, g.const(np.float32(2))])], axes=[-1])
        normed = g.node("Div", [centered, g.node("Sqrt", [g.node("Add", [
            var, g.const(np.float32(1e-5))])])])
        g.output(_linear(g, normed, 32, 32))
    else:
        y = g.node("Relu", [g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32, name="conv")])
        pooled = g.node("ReduceMean", [y], axes=[2, 3], name="pool")
        g.output(g.conv(g.qdq(pooled, 0.2), 32, 32, 1, name="next"))
    return g


def test_a_spatial_mean_is_a_pool_and_a_layernorm_mean_is_not() -> None:
    assert "QDQ304" in _codes(_mean_between_int8(layernorm=False))
    assert "QDQ304" not in _codes(_mean_between_int8(layernorm=True))


def _float_skip(next_int8: bool) -> GraphBuilder:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 32, 8, 8]), 0.1)
    y = g.bn(g.conv(x, 32, 32, name="conv"), 32)
    out = g.node("Relu", [g.node("Add", [y, "x"], name="add")], name="relu")
    g.output(g.conv(g.qdq(out, 0.2), 32, 32, name="next") if next_int8 else out)
    return g


def test_a_float_skip_is_reported_only_where_an_int8_reader_pays_for_it() -> None:
    assert "QDQ201" in _codes(_float_skip(next_int8=True))
    assert "QDQ201" not in _codes(_float_skip(next_int8=False))


def _add_reading_a_conv_through_qdq(shared: bool) -> GraphBuilder:
    """Add(DQ(Q(conv1)), DQ(Q(x))): that conv1 Q/DQ read by the Add alone (the Add should have
    fused into conv1), or shared with conv2 (conv1's output is needed apart anyway)."""
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 32, 8, 8]), 0.1, name="in")
    dq = g.qdq(g.conv(x, 32, 32, name="c1"), 0.2, name="c1_out")
    out = g.node("Relu", [g.node("Add", [dq, g.qdq("x", 0.1, name="skip")], name="add")])
    g.output(g.conv(g.qdq(out, 0.3), 32, 32, name="next"))
    if shared:
        g.output(g.conv(dq, 32, 32, name="c2"))
    return g


def test_a_qdq_shared_with_other_readers_breaks_no_residual_fusion() -> None:
    assert "QDQ202" in _codes(_add_reading_a_conv_through_qdq(shared=False))
    assert "QDQ202" not in _codes(_add_reading_a_conv_through_qdq(shared=True))


def _float_conv(after: str) -> GraphBuilder:
    """A float conv in a quantized model, fed by an INT8 conv's Relu or by a float Softmax."""
    g = GraphBuilder()
    y = g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32, name="conv")
    activation = g.node(after, [y], **({"axis": 1} if after == "Softmax" else {}))
    g.output(g.conv(activation, 32, 32, weight="float", name="float_conv"))
    return g


def test_a_float_conv_is_reported_unless_int8_would_not_pay_for_its_q() -> None:
    assert "QDQ102" in _codes(_float_conv("Relu"))  # its Q would fuse into the INT8 conv
    assert "QDQ102" not in _codes(_float_conv("Softmax"))  # 0.6 M MACs after float math


def test_a_float_conv_after_an_int8_conv_with_a_float_residual_is_not_reported() -> None:
    """The INT8 conv fused a float skip input, so it writes float (C3): the float conv's Q would
    be a Reformat of its own, which its 0.6 M MACs do not pay for (unlike after a plain INT8
    conv, where the Q fuses: ``_float_conv("Relu")`` above)."""
    g = GraphBuilder()
    x = g.input("x", [1, 32, 8, 8])
    added = g.node("Add", [g.conv(g.qdq(x, 0.1, name="in"), 32, 32, name="conv"), x])
    g.output(g.conv(added, 32, 32, weight="float", name="float_conv"))
    assert "QDQ102" not in _codes(g)


def _q_through_copies(producer: str) -> GraphBuilder:
    g = GraphBuilder()
    # Depthwise: the math after it is a layer of its own, whose output the Q must quantize.
    y = g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32, group=32, name="conv")
    copied = g.node("Transpose", [g.node("Reshape", [g.node(producer, [y]), g.const(
        np.array([1, 32, 8, 8], np.int64))])], perm=[0, 1, 3, 2])
    out = g.node("Relu", [g.conv(g.qdq(copied, 0.3, name="after_copy"), 32, 32, name="next")])
    g.output(g.conv(g.qdq(out, 0.3), 32, 32, name="last"))
    return g


def test_a_q_after_float_math_through_copies_is_not_stray() -> None:
    assert "QDQ407" in _codes(_q_through_copies("Abs"))
    assert "QDQ407" not in _codes(_q_through_copies("Erf"))


def test_a_q_after_a_layernorm_that_a_shape_reads_too_is_not_stray() -> None:
    # A pre-LayerNorm transformer (ViT, Whisper): the LayerNorm output feeds the projections
    # through one Q, and the attention reads its shape (Shape nodes on the DQ's output, as
    # trt.placement writes them). The Shape reads no value: the Q is still the projections' own.
    g = GraphBuilder()
    x = g.input("x", [1, 64, 256])
    normed = g.node("LayerNormalization", [x, g.const(np.ones(256, np.float32)),
                                           g.const(np.zeros(256, np.float32))], axis=-1)
    dq = g.qdq(normed, 0.05, name="ln")
    g.node("Shape", [dq], out="ln_shape")
    g.output("ln_shape")
    for name in ("q_proj", "k_proj", "v_proj"):
        weight = g.qdq(g.const(g.rng.normal(0, 0.05, (256, 256)).astype(np.float32)), 0.001,
                       name=f"{name}_w")
        g.output(g.node("MatMul", [dq, weight], name=name))
    assert "QDQ407" not in _codes(g, "11")


def test_a_dla_output_written_in_int8_costs_no_reformat_of_its_own() -> None:
    # On the GPU the output's DQ is a Reformat the Q/DQ add; on DLA the output leaves DLA's
    # native format through a Reformat whatever its precision (I6, E6), so QDQ407 stays quiet.
    def model() -> GraphBuilder:
        g = GraphBuilder()
        y = g.node("Relu", [g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32, name="c")])
        g.output(g.qdq(y, 0.1, name="out"))
        return g

    def standalone(target: str) -> list[str]:
        found = lint(model().ir(), trt="10", target=target).findings("QDQ407")
        return [f.message for f in found if "out_DQ" in f.message]

    assert standalone("gpu") and not standalone("dla")


def test_a_dla_output_behind_an_elided_copy_costs_no_reformat_of_its_own() -> None:
    # A TensorFlow export reshapes its last conv's output before the network output: the copy
    # is elided, and the output still leaves DLA from the conv's layer (I6, E6).
    g = GraphBuilder()
    y = g.node("Relu", [g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32, name="c")])
    flat = g.node("Reshape", [g.qdq(y, 0.1, name="c_out"),
                              g.const(np.array([1, 2048], np.int64))])
    g.output(g.qdq(flat, 0.1, name="out"))
    found = lint(g.ir(), trt="10", target="dla").findings("QDQ407")
    assert not [f.message for f in found if "out_DQ" in f.message], found


def test_add_inputs_with_their_own_ranges_are_dlas_normal_case() -> None:
    # An INT8 Add whose inputs carry different scales rescales one input on the GPU (QDQ203);
    # DLA's implicit build gives every tensor its own range and scales each Add input itself.
    def model() -> GraphBuilder:
        g = GraphBuilder()
        x = g.qdq(g.input("x", [1, 32, 16, 16]), 0.1, name="in")
        a = g.qdq(g.node("Relu", [g.conv(x, 32, 32, name="c1")]), 0.2, name="a")
        b = g.qdq(g.node("Relu", [g.conv(x, 32, 32, name="c2")]), 0.3, name="b")
        out = g.node("Add", [a, b], name="add")
        g.output(g.conv(g.qdq(out, 0.4), 32, 32, name="next"))
        return g

    assert "QDQ203" in set(lint(model().ir(), trt="10", target="gpu").codes())
    assert "QDQ203" not in set(lint(model().ir(), trt="10", target="dla").codes())


def test_the_explicit_mode_deconv_activation_reports_do_not_reach_dla() -> None:
    # QDQ106 relays reports of explicit-mode ConvTranspose+activation fusion failing; DLA builds
    # the translated model in implicit mode.
    g = GraphBuilder()
    w = g.weight((32, 32, 2, 2), axis=1)
    y = g.node("ConvTranspose", [g.qdq(g.input("x", [1, 32, 8, 8])), w], name="up",
               kernel_shape=[2, 2], strides=[2, 2])
    g.output(g.node("Relu", [y], name="act"))
    assert "QDQ106" in set(lint(g.ir(), trt="10", target="gpu").codes())
    assert "QDQ106" not in set(lint(g.ir(), trt="10", target="dla").codes())


def test_a_float_conv_the_size_rule_keeps_float_is_not_reported() -> None:
    # 4 input and 12 output channels: no INT8 kernel beats FP16 (C20); quantize and fix keep it
    # float too, so reporting it would leave every repaired model with a finding nothing fixes.
    g = GraphBuilder()
    y = g.node("Relu", [g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 4, name="conv")])
    g.output(g.conv(y, 4, 12, weight="float", name="float_conv"))
    assert "QDQ102" not in _codes(g)
    g = GraphBuilder()  # the same conv with 16 output channels is reported (its Q would fuse)
    y = g.node("Relu", [g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 4, name="conv")])
    g.output(g.conv(y, 4, 16, weight="float", name="float_conv"))
    assert "QDQ102" in _codes(g)


def test_a_float_conv_writing_into_a_standalone_q_is_reported() -> None:
    # The float conv after a Softmax that _float_conv("Softmax") does not report, now writing
    # into an INT8 conv through a Q/DQ (as ModelOpt leaves a conv whose GELU epilogue it does not
    # recognize): in INT8 its output Q fuses into it, which pays for the Q in front of it.
    def model(reader_int8: bool) -> GraphBuilder:
        g = GraphBuilder()
        y = g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32, name="conv")
        y = g.conv(g.node("Softmax", [y], axis=1), 32, 32, weight="float", name="float_conv")
        g.output(g.conv(g.qdq(y, 0.1), 32, 32, name="next") if reader_int8 else y)
        return g

    assert "QDQ102" in _codes(model(reader_int8=True))
    assert "QDQ102" not in _codes(model(reader_int8=False))


def test_a_qdq_on_a_dla_gpu_boundary_is_not_a_reformat_of_its_own() -> None:
    # An SVTR recognizer on DLA: its attention MatMuls of two activations fall back to the GPU
    # between projections on DLA. Leaving DLA and coming back takes a Reformat each way whatever
    # the precisions (E6, counted by QDQ505), so the Q/DQ there add none: QDQ407 stays quiet.
    from qdqkit.quantization import quantize
    from tests.quantization.float_models import svtr

    result = quantize(svtr().proto(), "random", target="dla", calib_limit=2)
    assert "QDQ505" in result.lint_warnings and "QDQ407" not in result.lint_warnings


def test_a_q_after_a_padded_window_partition_of_a_layernorm_is_not_stray() -> None:
    # Swin: LayerNorm -> Pad (by amounts the graph computes) -> Reshape/Transpose windows ->
    # the projections' Q. A Pad copies like the Reshapes (and Shapes reading it read no value),
    # so the Q is still the one after float math that nothing before it can absorb.
    g = GraphBuilder()
    x = g.input("x", [1, 64, 256])
    normed = g.node("LayerNormalization", [x, g.const(np.ones(256, np.float32)),
                                           g.const(np.zeros(256, np.float32))], axis=-1)
    grid = g.node("Reshape", [normed, g.const(np.array([1, 8, 8, 256], np.int64))])
    pads = g.node("Concat", [g.const(np.zeros(4, np.int64)), g.node("Shape", [grid], start=3)],
                  axis=0)
    padded = g.node("Pad", [grid, g.node("Mul", [pads, g.const(np.array(0, np.int64))])])
    windows = g.node("Reshape", [padded, g.node("Shape", [padded])])
    flat = g.node("Reshape", [windows, g.const(np.array([1, 64, 256], np.int64))])
    dq = g.qdq(flat, 0.05, name="win")
    weight = g.qdq(g.const(g.rng.normal(0, 0.05, (256, 256)).astype(np.float32)), 0.001,
                   name="qkv_w")
    g.output(g.node("MatMul", [dq, weight], name="qkv"))
    assert "QDQ407" not in _codes(g, "11")


def test_a_q_after_a_rolled_layernorm_output_is_not_stray() -> None:
    # Swin's shifted windows: torch.roll exports as two Slices of one tensor and a Concat, a
    # copy of the LayerNorm output like a Transpose is. The projections' Q after it is still
    # the one after float math that nothing before it can absorb.
    g = GraphBuilder()
    x = g.input("x", [1, 64, 256])
    normed = g.node("LayerNormalization", [x, g.const(np.ones(256, np.float32)),
                                           g.const(np.zeros(256, np.float32))], axis=-1)

    def piece(start: int, end: int) -> str:
        return g.node("Slice", [normed, g.const(np.array([start], np.int64)),
                                g.const(np.array([end], np.int64)),
                                g.const(np.array([1], np.int64))])

    rolled = g.node("Concat", [piece(60, 64), piece(0, 60)], axis=1)
    weight = g.qdq(g.const(g.rng.normal(0, 0.05, (256, 256)).astype(np.float32)), 0.001,
                   name="qkv_w")
    g.output(g.node("MatMul", [g.qdq(rolled, 0.05, name="rolled"), weight], name="qkv"))
    assert "QDQ407" not in _codes(g, "11")
