from __future__ import annotations

import math
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qdqkit.core.errors import QdqkitError
from qdqkit.trt.calib_cache import (
    format_calib_cache,
    hex_to_scale,
    parse_calib_cache,
    read_calib_cache,
    scale_to_hex,
)

CACHES = Path(__file__).parents[1] / "fixtures" / "translate" / "calib-caches"


def test_hex_is_big_endian_float32_bits() -> None:
    assert scale_to_hex(2.64 / 127) == "3caa4a57"
    assert scale_to_hex(1.0) == "3f800000"
    assert scale_to_hex(1 / 127) == "3c010204"
    # independent of our code: the big-endian bytes of the float32
    assert scale_to_hex(0.02) == struct.pack(">f", 0.02).hex()


def test_tiny_scales_are_zero_padded_to_eight_digits() -> None:
    tiny = 2.0**-100
    assert scale_to_hex(tiny) == "0d800000"
    assert scale_to_hex(tiny, pad=False) == "d800000"
    assert hex_to_scale("d800000") == tiny


def test_format_header_lines_and_trailing_newline() -> None:
    text = format_calib_cache({"input": 2.64 / 127, "a:b: c": 1.0}, "100300")
    assert text == "TRT-100300-EntropyCalibration2\ninput: 3caa4a57\na:b: c: 3f800000\n"


@pytest.mark.parametrize("version", ["8.6.1", "", "v8600", "86 00"])
def test_version_must_be_digits(version: str) -> None:
    with pytest.raises(QdqkitError, match="TensorRT version"):
        format_calib_cache({"x": 0.1}, version)


@pytest.mark.parametrize("bad", [float("nan"), -0.1, 0.0, float("inf")])
def test_non_positive_or_non_finite_scales_are_refused(bad: float) -> None:
    with pytest.raises(QdqkitError, match="'x'"):
        format_calib_cache({"x": bad})


@pytest.mark.parametrize("path", sorted(CACHES.iterdir()), ids=lambda p: p.name)
def test_real_caches_read_and_rewrite_byte_identically(path: Path) -> None:
    text = path.read_text()
    cache = read_calib_cache(path)
    assert cache.algorithm == "EntropyCalibration2"
    assert len(cache.scales) == text.count("\n") - 1
    assert format_calib_cache(cache.scales, cache.version) == text


def test_real_cache_details() -> None:
    yolo = read_calib_cache(CACHES / "qat2ptq.cache")
    assert yolo.version == "8600" and len(yolo.scales) == 197
    assert scale_to_hex(yolo.scales["images"]) == "3c00f9f4"
    assert math.isclose(yolo.dynamic_range("images"), 127 * yolo.scales["images"])
    tao = read_calib_cache(CACHES / "detectnet_v2_cal.bin")
    assert tao.version == "7000" and tao.scales["input_1"] == hex_to_scale("3c010a14")
    unnamed = [n for n in read_calib_cache(CACHES / "yolov3_cal.bin").scales if "(Unnamed" in n]
    assert unnamed, "the TRT 7 caches carry '(Unnamed Layer* N)' names"


def test_names_containing_colon_space_split_on_the_last_one() -> None:
    cache = parse_calib_cache("TRT-8601-EntropyCalibration2\nscope: inner: 3f800000\n")
    assert cache.scales == {"scope: inner": 1.0}


@pytest.mark.parametrize(
    "text", ["", "not a header\nx: 3f800000\n", "TRT-8600-EntropyCalibration2\nx 3f800000\n",
             "TRT-8600-EntropyCalibration2\nx: zz\n"],
)
def test_malformed_caches_give_one_line_errors(text: str) -> None:
    with pytest.raises(QdqkitError) as info:
        parse_calib_cache(text, "bad.cache")
    assert "\n" not in str(info.value) and "bad.cache" in str(info.value)


names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=30
)
scales = st.floats(min_value=2.0**-126, max_value=2.0**100, allow_nan=False, width=32)


@given(st.dictionaries(names, scales, max_size=20), st.sampled_from(["7000", "8600", "100300"]))
def test_write_read_round_trip(entries: dict[str, float], version: str) -> None:
    entries = {k: v for k, v in entries.items() if k.strip() == k and k}
    cache = parse_calib_cache(format_calib_cache(entries, version))
    assert cache.version == version
    assert cache.scales == entries
