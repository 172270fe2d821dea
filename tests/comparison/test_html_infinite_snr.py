"""The compare page with an exact node: a Shape reading a quantized tensor has an infinite SNR."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto

from qdqkit.cli import main
from qdqkit.comparison.html import SNR_BANDS, UNMEASURED_FILL, snr_fill
from qdqkit.examples.builder import build_qdq
from tests.comparison.models import small_net

SHAPE_NODE = "stem_shape"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The comparison net with a second output: the shape of the (quantized) stem activation."""
    tmp = tmp_path_factory.mktemp("inf")
    builder = small_net()
    shape = builder.node("Shape", ["stem_relu_out"], name=SHAPE_NODE)
    builder.graph.output(shape, [4], dtype=TensorProto.INT64)
    fpath, qpath = tmp / "float.onnx", tmp / "quant.onnx"
    onnx.save(builder.float_model(), fpath)
    onnx.save(build_qdq(builder), qpath)
    return fpath, qpath


def test_fill_of_every_snr_kind() -> None:
    assert snr_fill(math.inf) == SNR_BANDS[-1][1]  # exact: the best band
    assert snr_fill(1e6) == SNR_BANDS[-1][1]
    assert snr_fill(-math.inf) == SNR_BANDS[0][1]  # all noise: the worst band
    assert snr_fill(SNR_BANDS[0][0]) == SNR_BANDS[1][1]  # a bound opens the next band
    assert snr_fill(math.nan) == snr_fill(None) == UNMEASURED_FILL


def test_shape_output_is_exact_in_onnxruntime(models: tuple[Path, Path]) -> None:
    """The premise: quantization noise leaves the Shape output bit-identical."""
    feed = {"x": np.random.default_rng(0).uniform(-1, 1, (1, 3, 16, 16)).astype(np.float32)}
    shapes = [ort.InferenceSession(str(p), providers=["CPUExecutionProvider"])
              .run(["stem_shape_out"], feed)[0] for p in models]
    np.testing.assert_array_equal(shapes[0], shapes[1])


def test_cli_writes_the_page_and_fallback_list_with_an_infinite_snr_row(
        models: tuple[Path, Path], tmp_path: Path) -> None:
    fpath, qpath = models
    html, fallback = tmp_path / "r.html", tmp_path / "fallback.txt"
    assert main(["compare", str(fpath), str(qpath), "--samples", "2", "--what-if", "2",
                 "-o", str(html), "--fallback", str(fallback)]) == 0
    assert fallback.exists()
    text = html.read_text()
    row = re.search(rf'<tr data-node="{SHAPE_NODE}" style="--fill:([^"]+)">(.*?)</tr>', text)
    assert row, "the Shape node has no table row"
    assert row.group(1) == SNR_BANDS[-1][1]
    graph_snr = re.findall(r"<td[^>]*>([^<]*)</td>", row.group(2))[3]
    assert graph_snr == "inf"
    box = re.search(rf'<g class="node q" data-node="{SHAPE_NODE}">.*?fill="([^"]+)"', text)
    assert box and box.group(1) == SNR_BANDS[-1][1]
