"""The FP16 watch list: tensors inside a fused layer are not observed, block boundaries are.

Truth: the fusion rules of ``trt.predict.fusion`` as the documented TensorRT fusions (a conv with
its BatchNormalization and activation is one layer; a residual Add's inputs and any tensor with
two readers are written to memory), and the ranges of the float model run by onnxruntime.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir

from qdqkit.core.qdq import QdqView
from qdqkit.core.shapes import infer_value_types
from qdqkit.examples.graph import GraphBuilder, run_model
from qdqkit.linting import lint
from qdqkit.quantization import quantize
from qdqkit.quantization.fp16_watch import fp16_watch
from qdqkit.trt.predict.fusion import collect_facts, form_blocks
from tests.quantization.float_models import calibration_batches, resnet


def _chain(scale: float = 1.0) -> GraphBuilder:
    """x -> Conv -> BN -> Relu -> Conv -> Add(skip = first Relu) -> Relu -> y."""
    g = GraphBuilder("chain", seed=0, opset=19)
    x = g.input("x", [1, 8, 8, 8])
    c1 = g.conv(x, 8, 8, weight="float", name="conv1", std=0.3 * scale)
    b1 = g.bn(c1, 8, name="bn1")
    r1 = g.node("Relu", [b1], name="relu1", out="r1")
    c2 = g.conv(r1, 8, 8, weight="float", name="conv2")
    s = g.node("Add", [c2, r1], name="add", out="s")
    g.node("Relu", [s], name="relu2", out="y")
    g.output("y", [1, 8, 8, 8])
    return g


def test_only_tensors_inside_a_fused_layer_are_left_unwatched() -> None:
    model = ir.from_proto(_chain().proto())
    plan = fp16_watch(model, infer_value_types(model), quantized={"x", "r1"})
    conv1, bn1 = model.graph.node("conv1").outputs[0].name, model.graph.node("bn1").outputs[0].name
    conv2 = model.graph.node("conv2").outputs[0].name
    # conv1 -> bn1 -> relu1 is one layer: its two inner tensors stay inside it. The Add's skip
    # r1 has two readers, so the Add can fuse only into conv2: conv2's output is inside too.
    assert set(plan.stand_ins) == {conv1, bn1, conv2, "s"}
    # r1 has two readers; y is the network output.
    assert "r1" in plan.tensors and "y" in plan.tensors
    assert not set(plan.tensors) & set(plan.stand_ins)
    # The stand-in of an inner tensor is the hull of its layer's watched boundary.
    ranges = plan.ranges({"r1": (0.0, 5.0), "x": (-1.0, 1.0), "y": (0.0, 9.0)})
    assert ranges[conv1] == ranges[bn1] == (-1.0, 5.0)
    assert ranges[conv2] == ranges["s"] == (0.0, 9.0)


def test_a_quantization_point_or_a_wide_constant_keeps_a_tensor_watched() -> None:
    g = _chain()
    proto = g.proto()
    model = ir.from_proto(proto)
    conv1 = model.graph.node("conv1").outputs[0].name
    assert conv1 in fp16_watch(model, infer_value_types(model), {conv1}).tensors
    bias = next(t for t in proto.graph.initializer if t.name == "conv1.bias")
    bias.float_data[:] = []
    bias.raw_data = np.full(8, 1e5, np.float32).tobytes()
    wide = ir.from_proto(proto)
    plan = fp16_watch(wide, infer_value_types(wide), set())
    assert conv1 in plan.tensors and not plan.stand_ins.keys() & {conv1}


def test_a_layer_whose_boundary_overflows_is_kept_fp32_whole() -> None:
    g = _chain(scale=3000.0)
    batch = {"x": np.full((1, 8, 8, 8), 50.0, np.float32)}
    result = quantize(g.proto(), [batch], trt="11", method="max", exclude=["Conv"])
    kept = set(result.fp32_nodes)
    # Every conv is float (excluded) and conv1's layer (its BN folded in) writes beyond 65504:
    # the whole layer, not only the node whose observed tensor overflows, stays FP32.
    assert {"conv1", "relu1"} <= kept, result.fp32_nodes
    assert "bn1" not in {n.name for n in result.model.graph}


def test_stand_ins_keep_nothing_fp32_where_nothing_overflows() -> None:
    builder = resnet()
    result = quantize(builder.proto(), calibration_batches(builder, 2), trt="11")
    assert result.fp32_nodes == {}
    assert result.options["float_remainder"] == "fp16"


def _two_conv_add() -> GraphBuilder:
    """x -> Relu -> {convA -> bnA, convB -> bnB} -> Add -> Relu -> y: a downsample Add."""
    g = GraphBuilder("two_conv", seed=0, opset=19)
    x = g.input("x", [1, 8, 8, 8])
    r = g.node("Relu", [x], name="relu0", out="r")
    a = g.bn(g.conv(r, 8, 8, weight="float", name="convA"), 8, name="bnA")
    b = g.bn(g.conv(r, 8, 8, 1, weight="float", name="convB"), 8, name="bnB")
    s = g.node("Add", [a, b], name="add", out="s")
    g.node("Relu", [s], name="relu2", out="y")
    g.output("y", [1, 8, 8, 8])
    return g


def _fused_with(model: ir.Model, producer: str, reader: str) -> bool:
    """Whether the predictor puts ``producer`` and ``reader`` in one engine layer of ``model``."""
    facts = collect_facts(model.graph, QdqView(model.graph), infer_value_types(model))
    _, block_of = form_blocks(facts)
    nodes = {node.name: node for node in model.graph}
    block = block_of.get(nodes[producer])
    return block is not None and block_of.get(nodes[reader]) is block


def test_of_two_conv_chains_only_the_one_the_add_fuses_into_is_left_unwatched() -> None:
    model = ir.from_proto(_two_conv_add().proto())
    plan = fp16_watch(model, infer_value_types(model), quantized={"r"})
    a, b = (model.graph.node(n).outputs[0].name for n in ("bnA", "bnB"))
    # Both inputs are single-use conv chains: the predictor fuses the Add into the later one
    # (C5); the other is written to memory, so it is watched.
    assert _fused_with(model, "bnB", "add") and not _fused_with(model, "bnA", "add")
    assert a in plan.tensors and b in plan.stand_ins


def test_the_add_fuses_on_the_unwatched_input_in_the_quantized_model() -> None:
    # Q/DQ on the skip, FP16 casts and the rounds of settle must not move the Add to the other
    # input: every tensor left unwatched is still inside one layer of the model written.
    for builder in (resnet(), _two_conv_add(), _chain()):
        proto = builder.proto()
        model = ir.from_proto(proto)
        plan = fp16_watch(model, infer_value_types(model), set())
        # By tensor: quantize folds each BN into its conv, which takes over the BN's output.
        pairs = [(value.name or "", use.node.name or "") for node in model.graph
                 for value in node.outputs if value.name in plan.stand_ins
                 for use in value.uses() if use.node.op_type == "Add"]
        assert pairs, builder.proto().graph.name
        result = quantize(proto, calibration_batches(builder, 2), trt="11", method="max")
        writers = {v.name: n.name or "" for n in result.model.graph for v in n.outputs}
        for tensor, reader in pairs:
            assert _fused_with(result.model, writers[tensor], reader), (tensor, reader)


def _overflowing_pre_add(act: bool) -> onnx.ModelProto:
    """Conv output near 1e5 plus a skip near -5e4: the Add's output fits FP16, its conv input
    does not. With ``act`` a Relu sits between conv and Add, so the Add cannot fuse (C6)."""
    g = GraphBuilder("pre_add", seed=0, opset=19)
    x = g.input("x", [1, 16, 4, 4])
    c = g.conv(x, 16, 16, 1, weight="float", name="conv", bias=False)
    t = g.node("Relu", [c], name="relu_pre", out="t") if act else c
    skip = g.node("Mul", [x, g.const(np.float32(-500.0))], name="neg", out="skip")
    s = g.node("Add", [t, skip], name="add", out="s")
    g.node("Relu", [s], name="relu", out="y")
    g.output("y", [1, 16, 4, 4])
    proto = g.proto()
    weight = next(t for t in proto.graph.initializer if t.name == "conv.weight")
    weight.float_data[:] = []
    weight.raw_data = np.full((16, 16, 1, 1), 62.5, np.float32).tobytes()
    return proto


def test_a_pre_add_tensor_beyond_fp16_that_the_engine_never_writes_stays_fp16() -> None:
    batch = {"x": np.full((1, 16, 4, 4), 100.0, np.float32)}
    for act in (False, True):
        proto = _overflowing_pre_add(act)
        model = ir.from_proto(proto)
        t = model.graph.node("add").inputs[0]
        # Truth: onnxruntime's float run, the tensor before the Add reaches 1e5, the rest fits.
        fetched = run_model(_with_outputs(proto, [t.name or "", "skip"]), batch)
        assert float(np.max(fetched[1])) == 1e5 and float(np.max(fetched[0])) == 5e4
        assert float(np.min(fetched[2])) == -5e4
        result = quantize(proto, [batch], trt="11", method="max", exclude=["Conv"])
        plan = fp16_watch(model, infer_value_types(model), set())
        if not act:
            # The conv, its Add and Relu are one layer that computes on its FP32 accumulator
            # and writes only y: nothing needs FP32, and the engine predicted fuses them.
            assert t.name in plan.stand_ins and result.fp32_nodes == {}, result.fp32_nodes
            assert _fused_with(result.model, "conv", "add")
        else:
            # Conv-Relu-Add: the Add is a layer of its own and reads t from memory; t is
            # watched and what touches it stays FP32.
            assert t.name in plan.tensors and not _fused_with(result.model, "relu_pre", "add")
            assert {"relu_pre", "add"} <= set(result.fp32_nodes), result.fp32_nodes


def _with_outputs(proto: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    copy.graph.output.extend(onnx.ValueInfoProto(name=name) for name in names)
    return copy


def test_lint_takes_the_fp32_quantize_keeps_as_a_choice() -> None:
    g = _mixed_chain()
    batch = {"x": np.full((1, 8, 8, 8), 50.0, np.float32)}
    mixed = quantize(g.proto(), [batch], trt="11", method="max", exclude=["Conv"])
    assert mixed.fp32_nodes and "conv3" not in mixed.fp32_nodes
    # Part of the remainder runs FP16, so the FP32 layers are kept on purpose: no QDQ503.
    assert "QDQ503" not in lint(mixed.model, trt="11").codes()
    # All of it FP32: the float part was never converted, which QDQ503 reports.
    whole = quantize(g.proto(), [batch], trt="11", method="max", exclude=["Conv"],
                     high_precision="fp32")
    assert "QDQ503" in lint(whole.model, trt="11").codes()


def _mixed_chain() -> GraphBuilder:
    """``_chain`` overflowing FP16, then a Tanh and a tame conv3 (y -> Tanh -> conv3 -> out)."""
    g = GraphBuilder("mixed", seed=0, opset=19)
    x = g.input("x", [1, 8, 8, 8])
    c1 = g.conv(x, 8, 8, weight="float", name="conv1", std=900.0)
    r1 = g.node("Relu", [g.bn(c1, 8, name="bn1")], name="relu1", out="r1")
    s = g.node("Add", [g.conv(r1, 8, 8, weight="float", name="conv2"), r1], name="add", out="s")
    t = g.node("Tanh", [g.node("Relu", [s], name="relu2", out="y")], name="tanh", out="t")
    g.node("Relu", [g.conv(t, 8, 8, weight="float", name="conv3")], name="relu3", out="out")
    g.output("out", [1, 8, 8, 8])
    return g
