"""Streaming error statistics: a few running sums per tensor, never the tensors themselves.

1. ``Error`` keeps sum((r-t)^2), sum(r*t), sum(r^2), sum(t^2) and max|r-t| over every sample:
   SNR = 10 log10(sum r^2 / sum (r-t)^2), cosine = sum(r t) / sqrt(sum r^2 sum t^2). Dot products run
   in float32 BLAS per batch and add up in Python floats (float64). Tensors that differ in
   length along one axis (a sequence the values end) are zero-padded to the longer first.
2. ``Quantization`` fake-quantizes the float model's tensor with the Q/DQ model's own parameters
   (the ONNX spec: round half to even, saturate) and counts the values it clips (beyond the
   integer range before saturation) and saturates (at the range's ends after it).
3. ``Agreement`` counts, along the class axis, where both models pick the same class (argmax) and
   where the float model's class is among the quantized model's top k.
"""

from __future__ import annotations

import math

import numpy as np

from qdqkit.core.errors import QdqkitError
from qdqkit.core.numerics import ErrorMetrics
from qdqkit.core.qdq import QuantParams, quant_range
from qdqkit.core.qdq_math import dequantize, quantize


class Error:
    """Running error of ``test`` against ``reference`` over many batches."""

    __slots__ = ("dot", "max_abs", "noise", "ref_sq", "test_sq")

    def __init__(self) -> None:
        self.noise = self.dot = self.ref_sq = self.test_sq = self.max_abs = 0.0

    def add(self, reference: np.ndarray, test: np.ndarray, where: str = "") -> None:
        """Fold one batch in. Values that are not finite in both (an attention mask of -inf)
        count as agreeing where they are the same and as an infinite error where they are not;
        the other sums run over the values finite in both."""
        reference, test = _one_length(np.asarray(reference), np.asarray(test), where)
        ref = _flat32(reference)
        tst = _flat32(test)
        finite = np.isfinite(ref) & np.isfinite(tst)
        if not finite.all():
            agree = (ref == tst) | (np.isnan(ref) & np.isnan(tst))
            if not np.all(agree | finite):
                self.noise = self.max_abs = math.inf
            ref, tst = ref[finite], tst[finite]
        diff = ref - tst
        self.noise += float(np.dot(diff, diff))
        self.dot += float(np.dot(ref, tst))
        self.ref_sq += float(np.dot(ref, ref))
        self.test_sq += float(np.dot(tst, tst))
        if diff.size:
            self.max_abs = max(self.max_abs, float(np.max(np.abs(diff))))

    @property
    def seen(self) -> bool:
        return self.ref_sq > 0.0 or self.test_sq > 0.0 or self.noise > 0.0

    def metrics(self) -> ErrorMetrics:
        if self.noise == 0.0:
            snr = math.inf
        elif self.ref_sq == 0.0 or math.isinf(self.noise):
            snr = -math.inf
        else:
            snr = 10.0 * math.log10(self.ref_sq / self.noise)
        denom = math.sqrt(self.ref_sq) * math.sqrt(self.test_sq)
        both_zero = self.ref_sq == self.test_sq == 0.0
        cosine = (1.0 if both_zero else 0.0) if denom == 0.0 else self.dot / denom
        return ErrorMetrics(snr_db=snr, cosine=min(1.0, max(-1.0, cosine)), max_abs=self.max_abs)


def _one_length(reference: np.ndarray, test: np.ndarray, where: str
                ) -> tuple[np.ndarray, np.ndarray]:
    """The two tensors as one shape. Where they differ along one axis only, a sequence whose
    length the values decide (a decoder's Loop stopping at an end token) ran longer in one model:
    both are zero-padded to the longer, so the steps one model lacks count as error in full.
    Any other difference is a pairing the shapes contradict, and an error."""
    if reference.shape == test.shape:
        return reference, test
    differing = [i for i, (r, t) in enumerate(zip(reference.shape, test.shape, strict=False))
                 if r != t]
    if reference.ndim != test.ndim or len(differing) != 1:
        raise QdqkitError(
            f"tensor {where or '?'} has shape {list(reference.shape)} in one model and "
            f"{list(test.shape)} in the other; the paired tensors must have the same shape"
        )
    axis = differing[0]
    longer = max(reference.shape[axis], test.shape[axis])

    def padded(array: np.ndarray) -> np.ndarray:
        widths = [(0, 0)] * array.ndim
        widths[axis] = (0, longer - array.shape[axis])
        return np.pad(array, widths)

    return padded(reference), padded(test)


def _flat32(array: np.ndarray) -> np.ndarray:
    flat = np.asarray(array).reshape(-1)
    return flat if flat.dtype == np.float32 else flat.astype(np.float32)


class Quantization:
    """Clipped and saturated counts of one quantized tensor, and its fake-quantized values."""

    __slots__ = ("clipped", "count", "high", "integer", "low", "params", "saturated", "scale",
                 "zero")

    def __init__(self, params: QuantParams) -> None:
        self.params = params
        low, high = quant_range(params.quant_dtype)
        self.low, self.high = float(low), float(high)
        if self.low == self.high:  # FP8/FP4: the float type saturates at its largest finite value
            import ml_dtypes  # onnx's own dependency: the float8/float4 numpy types

            largest = float(ml_dtypes.finfo(params.quant_dtype.numpy()).max)
            self.low, self.high = -largest, largest
        self.integer = params.quant_dtype.numpy().kind in "iu"
        self.count = self.clipped = self.saturated = 0
        self.scale = np.float32(params.scalar_scale) if not params.per_channel else None
        zp = params.zero_point
        self.zero = np.float32(0.0 if zp is None else np.asarray(zp).reshape(-1)[0])

    def fake_quantize(self, x: np.ndarray) -> np.ndarray:
        """``DQ(Q(x))`` in float32, counting clipped and saturated values on the way."""
        values = np.asarray(x, dtype=np.float32)
        self.count += values.size
        if not self.integer:  # rounding to the float grid: the spec's arithmetic (qdq_math)
            scale = self.scale if self.scale is not None else _channel(self.params, values)
            self._count_ends(values / scale, None)
            return dequantize(quantize(values, self.params), self.params).astype(np.float32)
        if self.scale is None:  # per-channel activations: the spec's arithmetic, done generally
            rounded = np.rint(values / _channel(self.params, values)) if values.size else values
            q = quantize(values, self.params).astype(np.float32)
            self._count_ends(rounded + _zero(self.params, values), q)
            return dequantize(q, self.params).astype(np.float32)
        q = np.empty_like(values)  # an array even for a 0-d tensor, so the steps stay in place
        np.divide(values, self.scale, out=q)
        np.rint(q, out=q)
        q += self.zero
        self._count_ends(q, None)
        np.clip(q, self.low, self.high, out=q)
        q -= self.zero
        q *= self.scale
        return q

    def _count_ends(self, unclipped: np.ndarray, clipped: np.ndarray | None) -> None:
        below = int(np.count_nonzero(unclipped < self.low))
        above = int(np.count_nonzero(unclipped > self.high))
        self.clipped += below + above
        self.saturated += int(np.count_nonzero(unclipped <= self.low)) + int(
            np.count_nonzero(unclipped >= self.high))

    @property
    def clipped_fraction(self) -> float:
        return self.clipped / self.count if self.count else 0.0

    @property
    def saturated_fraction(self) -> float:
        return self.saturated / self.count if self.count else 0.0

    @property
    def clip_range(self) -> tuple[float, float]:
        """The float interval the quantizer represents, [(low - zp) s, (high - zp) s]."""
        scale = float(np.max(self.params.scale)) if self.scale is None else float(self.scale)
        return ((self.low - float(self.zero)) * scale, (self.high - float(self.zero)) * scale)


def _channel(params: QuantParams, values: np.ndarray) -> np.ndarray:
    shape = [1] * values.ndim
    shape[(params.axis or 1) % values.ndim] = params.scale.size
    return np.asarray(params.scale, np.float32).reshape(shape)


def _zero(params: QuantParams, values: np.ndarray) -> np.ndarray | float:
    if params.zero_point is None:
        return 0.0
    shape = [1] * values.ndim
    shape[(params.axis or 1) % values.ndim] = np.asarray(params.zero_point).size
    return np.asarray(params.zero_point, np.float32).reshape(shape)


class Agreement:
    """Argmax and top-k agreement of two models' outputs along ``axis``."""

    def __init__(self, axis: int = -1, k: int = 5) -> None:
        self.axis, self.k = axis, k
        self.positions = self.same_top1 = self.in_topk = 0
        self.classes = 0

    def add(self, reference: np.ndarray, test: np.ndarray) -> None:
        ref, tst = np.asarray(reference), np.asarray(test)
        if ref.ndim == 0 or ref.shape != tst.shape:
            return
        axis = self.axis % ref.ndim
        self.classes = ref.shape[axis]
        if self.classes < 2:
            return
        ref_top = np.expand_dims(np.argmax(ref, axis=axis), axis)
        tst_top = np.expand_dims(np.argmax(tst, axis=axis), axis)
        self.positions += ref_top.size
        self.same_top1 += int(np.count_nonzero(ref_top == tst_top))
        k = min(self.k, self.classes)
        # The float model's class ranks among the quantized model's k largest scores.
        chosen = np.take_along_axis(tst, ref_top, axis=axis)
        larger = np.count_nonzero(tst > chosen, axis=axis)
        self.in_topk += int(np.count_nonzero(larger < k))

    def argmax(self) -> float | None:
        return self.same_top1 / self.positions if self.positions else None

    def topk(self) -> float | None:
        return self.in_topk / self.positions if self.positions else None

    @property
    def effective_k(self) -> int:
        return min(self.k, self.classes) if self.classes else self.k
