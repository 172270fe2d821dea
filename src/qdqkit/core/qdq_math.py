"""QuantizeLinear/DequantizeLinear arithmetic in numpy, as the ONNX spec defines it.

Used to turn pre-quantized integer weights back into floats, to emulate fake quantization, to
derive the weight scales TensorRT computes itself, and to check scales. Per-tensor, per-axis and
blocked parameters are broadcast the way the spec says.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from qdqkit.core.qdq import QuantParams, quant_range


def _broadcast(param: np.ndarray, x_shape: tuple[int, ...], params: QuantParams) -> np.ndarray:
    if param.size == 1 and not params.block_size:
        return param.reshape(())
    rank = len(x_shape)
    axis = (params.axis if params.axis is not None else 1) % rank
    if params.block_size:
        expanded = np.repeat(param, params.block_size, axis=axis)
        return np.take(expanded, np.arange(x_shape[axis]), axis=axis)
    shape = [1] * rank
    shape[axis] = param.size
    return param.reshape(shape)


def dequantize(
    x: np.ndarray, params: QuantParams, out_dtype: np.dtype | type = np.float32
) -> np.ndarray:
    """``(x - zero_point) * scale``, computed in float64 and rounded once to ``out_dtype``.

    float64 holds every int8..int32 value and its product with a float32/fp16 scale exactly, so the
    single rounding at the end gives the correctly rounded float the DQ stands for.
    """
    values = np.asarray(x).astype(np.float64)
    scale = _broadcast(params.scale.astype(np.float64), values.shape, params)
    if params.zero_point is not None:
        values = values - _broadcast(
            np.asarray(params.zero_point).astype(np.float64), values.shape, params
        )
    return (values * scale).astype(out_dtype)


_FLOAT_QUANT_TYPES = frozenset({
    ir.DataType.FLOAT8E4M3FN, ir.DataType.FLOAT8E4M3FNUZ, ir.DataType.FLOAT8E5M2,
    ir.DataType.FLOAT8E5M2FNUZ, ir.DataType.FLOAT4E2M1})


def quantize(x: np.ndarray, params: QuantParams) -> np.ndarray:
    """Round half to even, add the zero point, saturate to the integer type's range; a float
    type (FP8, FP4) saturates to its largest finite value and rounds to nearest even in the cast,
    as QuantizeLinear's default ``saturate=1`` does (its zero point is 0 by the spec)."""
    lo, hi = quant_range(params.quant_dtype)
    xf = np.asarray(x).astype(np.float32)
    scale = _broadcast(params.scale.astype(np.float32), xf.shape, params)
    if lo == hi:
        if params.quant_dtype not in _FLOAT_QUANT_TYPES:
            raise ValueError(f"quantize: {params.quant_dtype.name} is not a quantized type")
        target = params.quant_dtype.numpy()
        import ml_dtypes  # onnx's own dependency: the float8/float4 numpy types

        largest = float(ml_dtypes.finfo(target).max)
        return np.clip(xf / scale, -largest, largest).astype(target)
    q = np.rint(xf / scale)
    if params.zero_point is not None:
        q = q + _broadcast(np.asarray(params.zero_point).astype(np.float32), xf.shape, params)
    return np.clip(q, lo, hi).astype(params.quant_dtype.numpy())


def fake_quantize(x: np.ndarray, params: QuantParams) -> np.ndarray:
    return dequantize(quantize(x, params), params)


def implicit_weight_scales(weight: np.ndarray, axis: int) -> np.ndarray:
    """max|w| / 127 per slice along ``axis`` (float64): how TensorRT derives INT8 weight scales.

    An all-zero slice gets 0; callers that need a usable scale there pick their own (any positive
    scale quantizes zeros to zeros).
    """
    w = np.asarray(weight)
    # Output channels usually come first already; np.moveaxis costs more than the rest here.
    moved = (w if axis == 0 else np.moveaxis(w, axis, 0)).reshape(w.shape[axis], -1)
    return np.abs(moved).max(axis=1).astype(np.float64) / 127.0


# Relative size of the float rounding of a TensorRT weight scale (a few float32 ulps of max|w|):
# a weight that moves by less than this under requantization keeps its integer values.
_GRID_TOLERANCE = 4 * float(np.finfo(np.float32).eps)


def trt_requantize_weight(weight: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """The weight TensorRT's implicit INT8 computes with, and per channel how far it moved.

    TensorRT derives each output channel's scale in float32 as ``max|w| / 127`` and rounds
    ``w / scale`` to int8 (half to even, -127..127). A channel already on that grid (``w = q * s``
    with max|q| = 127, as every max-calibrated Q/DQ weight is) requantizes to the same integers; its
    ``q * scale`` differs from ``w`` only by the float rounding of the scale, which is not a change
    of the weight, so that channel is returned unchanged rather than moved by an ulp. Returns
    (float32 weight, per-channel largest change relative to max|w|; 0 where nothing changed).
    """
    w = np.asarray(weight, dtype=np.float32)
    moved = np.moveaxis(w, axis, 0)
    rows = moved.reshape(moved.shape[0], -1)
    amax = np.abs(rows).max(axis=1) if rows.shape[1] else np.zeros(rows.shape[0], np.float32)
    scale = amax / np.float32(127.0)
    # An all-zero channel quantizes to zeros under any scale; 1 keeps the division defined.
    safe = np.where(scale > 0, scale, np.float32(1.0))[:, None]
    # In place on one buffer: weights are the largest arrays we touch, and each pass costs.
    requantized = np.divide(rows, safe)
    np.rint(requantized, out=requantized)
    np.clip(requantized, -127.0, 127.0, out=requantized)
    requantized *= safe
    if rows.shape[1]:
        difference = requantized - rows
        change = np.abs(difference, out=difference).max(axis=1)
        del difference
    else:
        change = amax
    relative = np.where(amax > 0, change / np.where(amax > 0, amax, 1), 0.0).astype(np.float64)
    on_grid = relative <= _GRID_TOLERANCE
    relative[on_grid] = 0.0
    if on_grid.all():
        return w, relative
    requantized[on_grid] = rows[on_grid]
    return np.moveaxis(requantized.reshape(moved.shape), 0, axis), relative
