"""GraphBuilder: every Q/DQ spelling it writes is a valid model that qdqkit reads back as spelled."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from qdqkit.core.qdq import QdqView
from qdqkit.examples.graph import GraphBuilder


@pytest.mark.parametrize("spelling", ["initializer", "constant", "identity", "cast"])
def test_activation_scale_spellings_read_back(spelling: str) -> None:
    g = GraphBuilder()
    y = g.qdq(g.input("x", [1, 4, 8, 8]), 0.02, spelling=spelling, name="act")
    g.output(g.node("Relu", [y], name="relu"))
    model = g.ir()
    assert g.run({"x": np.ones((1, 4, 8, 8), np.float32)})[0].shape == (1, 4, 8, 8)
    expected = float(np.float16(0.02)) if spelling == "cast" else float(np.float32(0.02))
    assert QdqView(model.graph).activation_scale_of(model.graph.inputs[0]) == expected
    assert [n.name for n in model.graph if n.op_type.endswith("Linear")] == ["act_Q", "act_DQ"]


@pytest.mark.parametrize("style", ["q-dq", "dq-only"])
@pytest.mark.parametrize("per_channel", [True, False])
def test_weight_styles_read_back(style: str, per_channel: bool) -> None:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 4, 8, 8]), zero_point=None)
    g.output(g.conv(x, 4, 8, name="conv", weight=style, per_channel=per_channel))  # type: ignore[arg-type]
    assert g.run({"x": np.ones((1, 4, 8, 8), np.float32)})[0].shape == (1, 8, 8, 8)
    model = g.ir()
    view = QdqView(model.graph)
    ref = view.weight_ref(model.graph.node("conv"), 1)
    assert ref is not None and ref.style == style and ref.params is not None
    assert ref.params.per_channel == per_channel
    assert view.params(view.quantize_nodes[0]).quant_dtype == ir.DataType.UINT8  # type: ignore[union-attr]


def test_residual_block_runs_and_is_seeded() -> None:
    def block(seed: int) -> list[np.ndarray]:
        g = GraphBuilder(seed=seed)
        y = g.residual(g.input("x", [1, 8, 4, 4]), 8, name="blk")
        g.output(g.gemm(g.node("Flatten", [g.node("GlobalAveragePool", [y])]), 8, 3, out="y"))
        return g.run({"x": np.ones((1, 8, 4, 4), np.float32)})

    assert block(0)[0].shape == (1, 3)
    np.testing.assert_array_equal(block(0)[0], block(0)[0])
    assert not np.array_equal(block(0)[0], block(1)[0])


def test_unnamed_nodes_multiple_outputs_and_subgraphs() -> None:
    body = GraphBuilder("branch")
    body.output(body.node("Identity", ["x"], name="", out="branch_out"))
    g = GraphBuilder(opset=18)
    halves = g.node("Split", [g.input("x", [4])], outputs=2, axis=0, num_outputs=2)
    g.output(g.node("If", [g.const(np.array(True))], name="if", out="y", then_branch=body.graph(),
                    else_branch=body.graph()))
    g.output(halves)
    proto = g.proto()
    assert list(proto.graph.node[0].output) == ["split1_out0", "split1_out1"]
    assert proto.graph.node[1].attribute[0].g.node[0].name == ""
    out = g.run({"x": np.arange(4, dtype=np.float32)})
    np.testing.assert_array_equal(out[0], np.arange(4))
