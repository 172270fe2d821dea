"""Accuracy of ``quantize`` on real pretrained models and labelled data, beside onnxruntime's
``quantize_static`` in its TensorRT configuration on the same calibration samples.

The small checks the suite can afford (the full proof is ``benchmarks/accuracy/run.py``): the
MNIST classifier on scikit-learn's digits and the PP-OCR angle classifier on rendered text lines.
Both INT8 models run as ``verify`` emulates TensorRT (optimizations off, FP16 upcast); ours must
keep the float task metric, reach at least onnxruntime's output SNR and metric, and quantize at
least as large a share of the MACs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx_ir as ir
import pytest
from benchmarks.peers import at_opset13, ort_quantize_static

from qdqkit.core.numerics import ErrorAccumulator, make_session
from qdqkit.core.upcast import upcast_float16
from qdqkit.linting import lint
from qdqkit.quantization import quantize

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
Feeds = dict[str, np.ndarray]


def _resize_linear(image: np.ndarray, size: int) -> np.ndarray:
    """Bilinear resize with pixel centres aligned (as image libraries do), one axis at a time."""
    src = np.arange(image.shape[0], dtype=np.float64)
    dst = np.clip((np.arange(size) + 0.5) * image.shape[0] / size - 0.5, 0, image.shape[0] - 1)
    rows = np.stack([np.interp(dst, src, column) for column in image.T], axis=1)
    return np.stack([np.interp(dst, src, row) for row in rows])


def _digits() -> tuple[list[Feeds], np.ndarray]:
    data = np.load(FIXTURES / "accuracy" / "digits.npz")
    feeds = []
    for pixels in data["pixels"].astype(np.float64) * (255.0 / 16.0):
        image = np.zeros((28, 28), np.float32)  # MNIST: the digit in a centred 20x20 box
        image[4:24, 4:24] = _resize_linear(pixels, 20)
        feeds.append({"Input3": image[None, None]})
    return feeds, data["labels"].astype(int)


def _text_lines() -> tuple[list[Feeds], np.ndarray]:
    data = np.load(FIXTURES / "accuracy" / "text_lines.npz")
    feeds = []
    for grey, width in zip(data["lines"], data["widths"], strict=True):
        x = np.zeros((1, 3, 48, 192), np.float32)
        x[0, :, :, :width] = (grey[:, :width].astype(np.float32) / 255.0 - 0.5) / 0.5
        feeds.append({"x": x})
    return feeds, data["labels"].astype(int)


def _evaluate(session: Any, feeds: list[Feeds], reference: list[np.ndarray] | None,
              labels: np.ndarray) -> tuple[int, float]:
    """(correct top-1 count, output SNR against ``reference``)."""
    outputs = [session.run(None, f)[0] for f in feeds]
    correct = sum(int(np.argmax(o)) == y for o, y in zip(outputs, labels, strict=True))
    if reference is None:
        return correct, float("inf")
    acc = ErrorAccumulator()
    for want, got in zip(reference, outputs, strict=True):
        acc.add(want, got)
    return correct, acc.result().snr_db


def _emulated(path: Path) -> Any:
    model = ir.load(str(path))
    upcast_float16(model)
    return make_session(model)


@pytest.mark.parametrize(("model", "data", "calib", "min_snr"), [
    ("mnist.onnx", _digits, 48, 33.0),
    ("ch_ppocr_mobile_v2.0_cls_infer.onnx", _text_lines, 16, 26.0),
])
def test_real_model_at_least_as_accurate_as_onnxruntime(
    tmp_path: Path, model: str, data: Any, calib: int, min_snr: float
) -> None:
    source = FIXTURES / "models" / model
    feeds, labels = data()
    calib_feeds, eval_feeds, eval_labels = feeds[:calib], feeds[calib:], labels[calib:]
    float_session = make_session(str(source))
    reference = [float_session.run(None, f)[0] for f in eval_feeds]
    float_correct, _ = _evaluate(float_session, eval_feeds, None, eval_labels)
    assert float_correct >= 0.9 * len(eval_feeds)  # the data is what the model was trained for

    ours, theirs = tmp_path / "ours.onnx", tmp_path / "ort.onnx"
    result = quantize(str(source), calib_feeds, output=ours)
    ort_quantize_static(at_opset13(source, tmp_path), theirs, calib_feeds)
    ours_correct, ours_snr = _evaluate(_emulated(ours), eval_feeds, reference, eval_labels)
    ort_correct, ort_snr = _evaluate(_emulated(theirs), eval_feeds, reference, eval_labels)

    assert ours_snr >= min_snr
    assert ours_snr >= ort_snr
    assert ours_correct >= ort_correct
    assert ours_correct >= float_correct - 1
    ours_share = lint(str(ours), trt="11").summary.int8_mac_share
    ort_share = lint(str(theirs), trt="11").summary.int8_mac_share
    assert result.int8_mac_share == pytest.approx(1.0)
    assert ours_share is not None and ort_share is not None and ours_share >= ort_share
