"""TensorRT calibration caches: write the text format implicit INT8 reads, and read any version's.

Format (TensorRT 7 to 10): a header ``TRT-<version>-<algorithm>`` and one ``<tensor>: <hex>`` line per
tensor, where ``<hex>`` is the float32 bit pattern of the tensor's scale (dynamic range / 127) as a
big-endian unsigned integer in lower-case hex; scale 2.64/127 is ``3caa4a57``. Every line ends in a
newline. Tensor names may themselves contain ``": "`` (TF/UFF names), so readers split on the last one.

We write 8 zero-padded hex digits: trtexec reads exactly 8 characters after ``": "`` and ModelOpt
decodes with ``bytes.fromhex``, both of which need them. The reference translator does not pad, which
only differs for scales below 2**-95 (never a real activation scale).
"""

from __future__ import annotations

import math
import os
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from qdqkit.core.errors import QdqkitError

DEFAULT_ALGORITHM = "EntropyCalibration2"
_HEADER = re.compile(r"^TRT-(\d+)-([A-Za-z0-9]+)$")


class CalibCacheError(QdqkitError):
    """A calibration cache cannot be read or written."""


def scale_to_hex(scale: float, *, pad: bool = True) -> str:
    """The cache spelling of ``scale``: float32 bits, big-endian, lower-case hex."""
    bits = struct.unpack(">I", struct.pack(">f", scale))[0]
    return f"{bits:08x}" if pad else f"{bits:x}"


def hex_to_scale(text: str) -> float:
    """Inverse of ``scale_to_hex``; accepts unpadded spellings (``0`` is 0.0)."""
    bits = int(text, 16)
    if not 0 <= bits <= 0xFFFFFFFF:
        raise ValueError(f"{text!r} is not a 32-bit value")
    return float(struct.unpack(">f", struct.pack(">I", bits))[0])


def check_version(version: str) -> str:
    """TensorRT's own version number: digits only (8.6.0 -> 8600, 10.3.0 -> 100300)."""
    text = str(version).strip()
    if not text.isdigit():
        raise CalibCacheError(
            f"calibration version '{version}' is not a TensorRT version number; give digits as "
            "TensorRT writes them, e.g. 8600 for 8.6.0 or 100300 for 10.3.0"
        )
    return text


def format_calib_cache(
    scales: Mapping[str, float], version: str = "8600", algorithm: str = DEFAULT_ALGORITHM
) -> str:
    """The cache text for ``scales`` (tensor name -> scale), in the mapping's order."""
    lines = [f"TRT-{check_version(version)}-{algorithm}"]
    for name, scale in scales.items():
        if not name or "\n" in name:
            raise CalibCacheError(f"tensor name {name!r} cannot be written to a calibration cache")
        if not (math.isfinite(scale) and scale > 0):
            raise CalibCacheError(
                f"tensor '{name}' has scale {scale}; a calibration cache needs positive, finite "
                "scales"
            )
        lines.append(f"{name}: {scale_to_hex(scale)}")
    return "\n".join(lines) + "\n"


@dataclass
class CalibCache:
    """A parsed cache: header fields and the scales in file order."""

    version: str
    algorithm: str
    scales: dict[str, float] = field(default_factory=dict)

    def dynamic_range(self, tensor: str) -> float:
        return 127.0 * self.scales[tensor]


def parse_calib_cache(text: str, source: str = "calibration cache") -> CalibCache:
    lines = text.splitlines()
    if not lines:
        raise CalibCacheError(f"{source}: empty file; expected a 'TRT-<version>-<algorithm>' header")
    match = _HEADER.match(lines[0].strip())
    if match is None:
        raise CalibCacheError(
            f"{source}: first line {lines[0][:80]!r} is not a TensorRT cache header "
            "'TRT-<version>-<algorithm>'"
        )
    cache = CalibCache(version=match.group(1), algorithm=match.group(2))
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        name, sep, hex_text = line.rpartition(": ")
        if not sep or not name:
            raise CalibCacheError(f"{source}: line {number} is not '<tensor>: <hex>': {line[:80]!r}")
        try:
            cache.scales[name] = hex_to_scale(hex_text.strip())
        except ValueError:
            raise CalibCacheError(
                f"{source}: line {number} has {hex_text.strip()!r}, not a 32-bit hex value"
            ) from None
    return cache


def read_calib_cache(path: str | os.PathLike[str]) -> CalibCache:
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CalibCacheError(f"{file}: no such calibration cache") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CalibCacheError(f"{file}: cannot read calibration cache ({exc})") from None
    return parse_calib_cache(text, str(file))
