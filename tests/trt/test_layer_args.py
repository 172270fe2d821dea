from __future__ import annotations

import pytest

from qdqkit.core.errors import QdqkitError
from qdqkit.trt.layer_args import format_layer_precisions, parse_layer_precisions, trtexec_command


def test_unique_entries_without_trailing_newline() -> None:
    text = format_layer_precisions(["a", "b/c", "a", "/m.0/Conv"])
    assert text == "a:fp16,b/c:fp16,/m.0/Conv:fp16"
    assert parse_layer_precisions(text) == {"a": "fp16", "b/c": "fp16", "/m.0/Conv": "fp16"}


def test_empty_list_is_an_empty_string() -> None:
    assert format_layer_precisions([]) == ""


def test_empty_names_are_refused() -> None:
    with pytest.raises(QdqkitError, match="empty node name"):
        format_layer_precisions(["a", ""])


def test_trtexec_command_mentions_every_output() -> None:
    line = trtexec_command("m_noqdq.onnx", "m.cache", "a:fp16", dla_core=0)
    assert line.split() == [
        "trtexec", "--onnx=m_noqdq.onnx", "--calib=m.cache", "--int8", "--fp16",
        "--precisionConstraints=prefer", "--layerPrecisions=a:fp16", "--useDLACore=0",
        "--allowGPUFallback",
    ]
    assert "--layerPrecisions" not in trtexec_command("m.onnx", "m.cache", "")
