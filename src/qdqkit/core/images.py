"""A folder of images as calibration data for a one-input image model.

Each image becomes one sample: decoded to RGB (or gray for one channel), resized to the model's
height and width (or the size the spec gives) with bilinear filtering, then per channel
``value = (pixel * scale - mean) / std``, reordered to BGR if asked and laid out NCHW or NHWC.
Pillow is an optional extra (``qdqkit[images]``) imported only here, when images are read.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from qdqkit.core.errors import QdqkitError
from qdqkit.core.model_inputs import ModelInput

IMAGE_SUFFIXES = frozenset(
    {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"}
)


@dataclass(frozen=True)
class Preprocess:
    """How an image becomes a model input.

    ``size`` is (height, width), None to take both from the model; ``mean`` and ``std`` are per
    channel in the output channel order and apply after ``scale`` (so ImageNet's mean is
    ``(0.485, 0.456, 0.406)`` with the default ``scale`` of 1/255); ``channel_order`` is ``"RGB"``
    or ``"BGR"``; ``layout`` is ``"NCHW"`` or ``"NHWC"``.
    """

    size: tuple[int, int] | None = None
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)
    scale: float = 1.0 / 255.0
    channel_order: str = "RGB"
    layout: str = "NCHW"

    def __post_init__(self) -> None:
        if self.channel_order not in ("RGB", "BGR"):
            raise QdqkitError(f"preprocess: channel order must be RGB or BGR, not {self.channel_order!r}")
        if self.layout not in ("NCHW", "NHWC"):
            raise QdqkitError(f"preprocess: layout must be NCHW or NHWC, not {self.layout!r}")
        if any(s == 0 for s in self.std):
            raise QdqkitError("preprocess: std must not contain 0")


def _pillow() -> Any:
    try:
        from PIL import Image
    except ImportError:
        raise QdqkitError(
            "reading images needs Pillow: pip install 'qdqkit[images]' (or pass .npy/.npz data)"
        ) from None
    return Image


def _geometry(model_input: ModelInput, spec: Preprocess) -> tuple[int, int, int]:
    """(channels, height, width) the model wants, checked against the spec."""
    dims = model_input.dims
    if dims is not None and len(dims) != 4:
        raise QdqkitError(
            f"images: model input '{model_input.name}' has shape {model_input.shape_text()}, "
            "not an image batch (rank 4); pass .npy/.npz data instead"
        )
    if dims is None:
        channels, height, width = 3, None, None
    elif spec.layout == "NCHW":
        channels, height, width = dims[1] or 3, dims[2], dims[3]
    else:
        height, width, channels = dims[1], dims[2], dims[3] or 3
    if spec.size is not None:
        want_h, want_w = spec.size
        if (height not in (None, want_h)) or (width not in (None, want_w)):
            fits = f"{height or want_h}x{width or want_w}"
            raise QdqkitError(
                f"images: the size {want_h}x{want_w} does not match model input "
                f"'{model_input.name}' {model_input.shape_text()} ({spec.layout}); sizes are "
                f"height x width: use size={fits} or leave size out"
            )
        height, width = want_h, want_w
    if height is None or width is None:
        raise QdqkitError(
            f"images: model input '{model_input.name}' {model_input.shape_text()} has a dynamic "
            "height or width; give the preprocessing size (height, width)"
        )
    if channels not in (1, 3):
        raise QdqkitError(
            f"images: model input '{model_input.name}' {model_input.shape_text()} has {channels} "
            f"channels in {spec.layout}; images give 1 or 3 (is the layout right?)"
        )
    return channels, height, width


def image_chunks(
    files: Sequence[Path], model_input: ModelInput, spec: Preprocess
) -> Iterator[dict[str, np.ndarray]]:
    """One ``{input: array of one sample}`` per image, decoded only when it is reached."""
    image_module = _pillow()
    channels, height, width = _geometry(model_input, spec)
    mean = np.asarray(spec.mean, np.float32)
    std = np.asarray(spec.std, np.float32)
    for stat, label in ((mean, "mean"), (std, "std")):
        if stat.size not in (1, channels):
            raise QdqkitError(
                f"preprocess: {label} has {stat.size} values; the model takes {channels} channels"
            )
    for file in files:
        try:
            with image_module.open(file) as image:
                image = image.convert("RGB" if channels == 3 else "L")
                image = image.resize((width, height), image_module.Resampling.BILINEAR)
                pixels = np.asarray(image, dtype=np.float32)
        except Exception as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise QdqkitError(
                f"{file}: not a readable image ({reason}); remove or convert it"
            ) from None
        if pixels.ndim == 2:
            pixels = pixels[:, :, None]
        if spec.channel_order == "BGR":
            pixels = pixels[:, :, ::-1]
        pixels = (pixels * np.float32(spec.scale) - mean) / std
        if spec.layout == "NCHW":
            pixels = pixels.transpose(2, 0, 1)
        yield {model_input.name: np.ascontiguousarray(pixels[None])}
