"""``quantize`` judges which INT8 regions pay at the shapes a user deploys (``shapes``), not only
at the calibration data's first batch: a conv behind a Sigmoid needs a standalone Q whose
Reformat costs more than INT8 saves on 4x4 images, and less on sixteen 512x512 ones."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from qdqkit.core.errors import QdqkitError
from qdqkit.examples.graph import GraphBuilder
from qdqkit.quantization import quantize


def _behind_sigmoid() -> GraphBuilder:
    g = GraphBuilder("behind_sigmoid", seed=3)
    x = g.input("x", ["N", 64, "H", "W"])
    z = g.conv(g.node("Sigmoid", [x]), 64, 256, k=3, weight="float", name="c2")
    g.output(z, ["N", 256, "H", "W"])
    return g


def _data(count: int = 4) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [{"x": rng.normal(0, 1, (1, 64, 4, 4)).astype(np.float32)} for _ in range(count)]


def test_the_deployed_shapes_decide_which_regions_pay(tmp_path: Path) -> None:
    proto = _behind_sigmoid().proto()
    small = quantize(proto, _data(), method="max", trt="11")
    assert small.judged_shapes == {"x": [1, 64, 4, 4]} and small.options["shapes"] is None
    assert [w.quantized for w in small.weighted] == [False]
    deployed = {"x": [16, 64, 512, 512]}
    out = tmp_path / "q.onnx"
    large = quantize(proto, _data(), output=out, method="max", trt="11", shapes=deployed)
    assert [w.quantized for w in large.weighted] == [True]
    assert large.judged_shapes == deployed and large.options["shapes"] == deployed
    report = json.loads((tmp_path / "q.quant.json").read_text())
    assert report["engine"]["input_shapes"] == deployed
    # The calibration data kept its own shapes: the same scale as the run without shapes.
    assert [t.scale for t in large.tensors] == [
        t.scale for t in quantize(proto, _data(), method="max", trt="11", keep_unpaid=True).tensors]


def _two_inputs() -> GraphBuilder:
    g = GraphBuilder("two_inputs", seed=1)
    total = g.node("Add", [g.input("a", ["N", 8, 16, 16]), g.input("b", ["N", 8, 16, 16])])
    g.output(g.conv(total, 8, 8, weight="float"), ["N", 8, 16, 16])
    return g


@pytest.mark.parametrize("shapes, message", [
    ({"c": [1, 8, 16, 16]}, "--shapes names 'c', which is not an input of the model"),
    ({"a": [1, 8, 16], "b": [1, 8, 16, 16]}, "input 'a' has 4 dimensions; --shapes gives 3"),
    ({"a": [1, 4, 16, 16], "b": [1, 8, 16, 16]}, "input 'a' axis 1 is fixed at 8"),
    ({"a": [4, 8, 16, 16]}, "--shapes leaves out 'b', whose dimensions are dynamic too"),
])
def test_deployed_shapes_that_do_not_fit_the_model_are_one_line_errors(
        tmp_path: Path, shapes: dict[str, list[int]], message: str) -> None:
    rng = np.random.default_rng(0)
    data = [{name: rng.normal(0, 1, (1, 8, 16, 16)).astype(np.float32) for name in "ab"}]
    out = tmp_path / "q.onnx"
    with pytest.raises(QdqkitError, match=message):
        quantize(_two_inputs().proto(), data, output=out, shapes=shapes)
    assert list(tmp_path.iterdir()) == []


def test_shapes_a_fixed_dimension_contradicts_are_refused_by_fix_and_lint_too() -> None:
    """The same check in every command that takes deployed shapes (one reader, one rule)."""
    from qdqkit.core.qdq import is_quantize
    from qdqkit.fixing import fix
    from qdqkit.linting import lint
    from tests.quantization.float_models import calibration_batches, resnet

    builder = resnet()
    quantized = quantize(builder.proto(), calibration_batches(builder, 2), method="max").model
    assert quantized is not None and any(is_quantize(n) for n in quantized.graph)
    name = quantized.graph.inputs[0].name
    wrong = {name: [8, *list(quantized.graph.inputs[0].shape or [])[1:]]}
    with pytest.raises(QdqkitError, match=f"input '{name}' axis 0 is fixed at 1"):
        fix(quantized, dry_run=True, shapes=wrong)
    with pytest.raises(QdqkitError, match=f"input '{name}' axis 0 is fixed at 1"):
        lint(quantized, shapes=",".join(f"{k}:{'x'.join(map(str, v))}" for k, v in wrong.items()))
