"""QuantizeLinear/DequantizeLinear arithmetic in numpy, as the ONNX spec defines it.

Used to turn pre-quantized integer weights back into floats, to emulate fake quantization, and to
check scales. Per-tensor, per-axis and blocked parameters are broadcast the way the spec says.
"""

from __future__ import annotations

import numpy as np

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


def dequantize(x: np.ndarray, params: QuantParams) -> np.ndarray:
    """``(x - zero_point) * scale`` in float32 (the DQ output type for float32 scales)."""
    xf = np.asarray(x).astype(np.float32)
    scale = _broadcast(params.scale.astype(np.float32), xf.shape, params)
    if params.zero_point is not None:
        zp = _broadcast(np.asarray(params.zero_point).astype(np.float32), xf.shape, params)
        xf = xf - zp
    return (xf * scale).astype(np.float32)


def quantize(x: np.ndarray, params: QuantParams) -> np.ndarray:
    """Round half to even, add the zero point, saturate to the integer type's range."""
    lo, hi = quant_range(params.quant_dtype)
    if lo == hi:
        raise ValueError(f"quantize: {params.quant_dtype.name} is not an integer type")
    xf = np.asarray(x).astype(np.float32)
    scale = _broadcast(params.scale.astype(np.float32), xf.shape, params)
    q = np.rint(xf / scale)
    if params.zero_point is not None:
        q = q + _broadcast(np.asarray(params.zero_point).astype(np.float32), xf.shape, params)
    return np.clip(q, lo, hi).astype(params.quant_dtype.numpy())


def fake_quantize(x: np.ndarray, params: QuantParams) -> np.ndarray:
    return dequantize(quantize(x, params), params)


def per_channel_max_scales(weight: np.ndarray, axis: int = 0) -> np.ndarray:
    """max|w| / 127 per slice along ``axis``: how TensorRT derives implicit INT8 weight scales."""
    w = np.moveaxis(np.asarray(weight, dtype=np.float32), axis, 0)
    amax = np.abs(w.reshape(w.shape[0], -1)).max(axis=1)
    return (amax / 127.0).astype(np.float32)
