"""The prediction's read-only queries: node -> layer, Q/DQ -> Reformat, value -> INT8, layer -> cost."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import onnx_ir as ir
import pytest

import qdqkit.trt.predict.weighted as weighted_module
from qdqkit.examples.graph import GraphBuilder
from qdqkit.report.json_output import to_jsonable
from qdqkit.trt.predict import Prediction, run_prediction
from qdqkit.trt.predict.state import Int8Tensor


def _prediction() -> tuple[Prediction, dict[str, ir.Node]]:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 32, 8, 8]), 0.1, name="in")
    y = g.node("Relu", [g.conv(x, 32, 32, name="conv")], name="relu")
    t = g.node("Tanh", [g.qdq(y, 0.2, name="mid")], name="tanh")
    g.output(t)
    model = g.ir()
    nodes = {node.name: node for node in model.graph}
    return run_prediction(model), nodes


def test_node_to_layer_and_qdq_to_reformat() -> None:
    prediction, nodes = _prediction()
    conv_layer = prediction.layer_of(nodes["conv"])
    assert conv_layer is not None and "relu" in conv_layer.onnx_nodes
    assert prediction.layer_of(nodes["relu"]) is conv_layer
    block = prediction.block_of(nodes["conv"])
    assert block is not None and prediction.block_layer(block) is conv_layer
    # The input Q cannot fuse into anything earlier: its own Reformat.
    reformat = prediction.reformat_of(nodes["in_Q"])
    assert reformat is not None and reformat.origin == "QDQ"
    # The DQ in front of a float Tanh becomes a Reformat that reads the conv's INT8 output.
    assert prediction.reformats_reading(conv_layer) == [prediction.reformat_of(nodes["mid_DQ"])]


def test_int8_values_and_layer_costs() -> None:
    prediction, nodes = _prediction()
    int8 = prediction.int8_of(nodes["mid_DQ"].outputs[0])
    # The Q fused into the conv, which writes its own output in INT8.
    assert int8 == Int8Tensor(engine_name="relu_out", scale=pytest.approx(0.2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        int8.scale = 1.0  # type: ignore[misc]
    assert prediction.int8_of(nodes["tanh"].outputs[0]) is None
    conv_layer = prediction.layer_of(nodes["conv"])
    cost = prediction.cost_of(conv_layer)
    assert cost is not None and cost.int8_compute and cost.macs == 8 * 8 * 32 * 32 * 9
    tanh_block = prediction.block_of(nodes["tanh"])
    assert prediction.external_inputs(tanh_block) == [nodes["mid_DQ"].outputs[0]]
    assert prediction.cost_of(prediction.block_layer(tanh_block)) is None


def test_layer_cost_is_printed_in_extra_as_before() -> None:
    prediction, nodes = _prediction()
    data = json.loads(json.dumps(to_jsonable(prediction.layer_of(nodes["conv"]))))
    assert data["extra"] == {"macs": 8 * 8 * 32 * 32 * 9, "int8_compute": True}
    assert "cost" not in data


def test_weighted_decisions_do_not_import_the_walk() -> None:
    tree = ast.parse(Path(weighted_module.__file__).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "qdqkit.trt.predict.walk" not in imported
