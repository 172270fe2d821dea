"""Big weights without big memory: read and write an ONNX file's large tensors in place.

Parsing an ONNX file with protobuf copies every weight into memory, and serializing copies it twice
more; a 300 MB model then peaks above 1.5 GB. Here we read the protobuf wire format ourselves, just
deep enough to find each initializer's ``raw_data``: large ones are cut out of the message and turned
into external-data references to *the model file itself* (offset and length), which onnx-ir maps
lazily. On save, large tensors are left out of the serialized message and streamed after it as a
second ``graph`` field holding only initializers; protobuf merges repeated occurrences of a message
field, so readers see one graph whose initializer list ends with them.

Wire format reminders: a field key is a varint ``number << 3 | wire_type``; wire type 2 is
length-delimited (varint length, then bytes); ModelProto.graph = 7, GraphProto.initializer = 5,
TensorProto.raw_data = 9, external_data = 13, data_location = 14.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np
import onnx
import onnx_ir as ir

# Tensors at least this large are kept out of memory on load and streamed on save; files smaller
# than LAZY_FILE_BYTES load whole (the scan would cost more than the memory it saves).
LARGE_TENSOR_BYTES = 1 << 20
LAZY_FILE_BYTES = 64 << 20
_MODEL_GRAPH, _GRAPH_INITIALIZER, _TENSOR_RAW_DATA = 7, 5, 9


class WireFormatError(ValueError):
    """The bytes are not a well-formed protobuf message."""


def _varint(buf: memoryview | bytes, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise WireFormatError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireFormatError("varint too long")


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _fields(buf: memoryview, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """(number, wire type, field start, value start, field end) for each field in buf[start:end]."""
    pos = start
    while pos < end:
        field_start = pos
        key, pos = _varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _varint(buf, pos, end)
            value_start = pos
        elif wire == 1:
            value_start, pos = pos, pos + 8
        elif wire == 2:
            length, value_start = _varint(buf, pos, end)
            pos = value_start + length
        elif wire == 5:
            value_start, pos = pos, pos + 4
        else:
            raise WireFormatError(f"unsupported wire type {wire}")
        if pos > end:
            raise WireFormatError("field runs past the end of its message")
        yield number, wire, field_start, value_start, pos


def _len_field(number: int, payload: bytes) -> bytes:
    return encode_varint(number << 3 | 2) + encode_varint(len(payload)) + payload


def _external_fields(location: str, offset: int, length: int) -> bytes:
    entries = b"".join(
        _len_field(13, _len_field(1, key.encode()) + _len_field(2, value.encode()))
        for key, value in (("location", location), ("offset", str(offset)),
                           ("length", str(length)))
    )
    return entries + encode_varint(14 << 3) + encode_varint(onnx.TensorProto.EXTERNAL)


def _slim_tensor(buf: memoryview, start: int, end: int, location: str) -> bytes | None:
    """The tensor message without its large raw_data, pointing at the data in place; or None."""
    parts: list[bytes] = []
    moved = None
    for number, wire, f_start, v_start, f_end in _fields(buf, start, end):
        if number == _TENSOR_RAW_DATA and wire == 2 and f_end - v_start >= LARGE_TENSOR_BYTES:
            moved = (v_start, f_end - v_start)
        elif number in (13, 14):
            return None  # already external: leave it as the producer wrote it
        else:
            parts.append(bytes(buf[f_start:f_end]))
    if moved is None:
        return None
    return b"".join(parts) + _external_fields(location, *moved)


def _slim_graph(buf: memoryview, start: int, end: int, location: str) -> bytes | None:
    parts: list[bytes] = []
    changed = False
    for number, wire, f_start, v_start, f_end in _fields(buf, start, end):
        slim = None
        if number == _GRAPH_INITIALIZER and wire == 2:
            slim = _slim_tensor(buf, v_start, f_end, location)
        if slim is None:
            parts.append(bytes(buf[f_start:f_end]))
        else:
            parts.append(_len_field(_GRAPH_INITIALIZER, slim))
            changed = True
    return b"".join(parts) if changed else None


def slim_model_bytes(path: Path) -> bytes | None:
    """The model's bytes with large initializer data replaced by references into ``path``.

    None when nothing is large enough to be worth it (the caller loads normally).
    """
    size = path.stat().st_size
    if size < max(LARGE_TENSOR_BYTES, LAZY_FILE_BYTES):
        return None
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        buf = memoryview(mapped)
        try:
            parts: list[bytes] = []
            changed = False
            for number, wire, f_start, v_start, f_end in _fields(buf, 0, size):
                slim = None
                if number == _MODEL_GRAPH and wire == 2:
                    slim = _slim_graph(buf, v_start, f_end, path.name)
                if slim is None:
                    parts.append(bytes(buf[f_start:f_end]))
                else:
                    parts.append(_len_field(_MODEL_GRAPH, slim))
                    changed = True
        finally:
            buf.release()
    return b"".join(parts) if changed else None


def load_lazily(
    path: Path, check: Callable[[onnx.ModelProto], None] | None = None
) -> ir.Model | None:
    """Load ``path`` with its large weights mapped from the file on demand, or None if none.

    ``check`` sees the parsed protobuf (large weights already cut out) before onnx-ir does.
    """
    data = slim_model_bytes(path)
    if data is None:
        return None
    proto = onnx.ModelProto()
    proto.ParseFromString(data)
    del data
    if check is not None:
        check(proto)
    model = ir.serde.deserialize_model(proto)
    base_dir = os.fspath(path.resolve().parent)
    for value in model.graph.initializers.values():
        if isinstance(value.const_value, ir.ExternalTensor):
            value.const_value.base_dir = base_dir
    return model


def _streamable(tensor: ir.TensorProtocol | None, nbytes: int | None = None) -> bool:
    """Whether ``tensor`` is written by streaming; ``nbytes``: its size, if already known."""
    if tensor is None or isinstance(tensor, ir.StringTensor) or tensor.dtype.bitwidth % 8:
        return False
    if isinstance(tensor, ir.ExternalTensor):
        return True
    return (tensor.nbytes if nbytes is None else nbytes) >= LARGE_TENSOR_BYTES


def write_streaming(model: ir.Model, stream: BinaryIO) -> None:
    """Serialize ``model`` to ``stream`` with large and external tensors streamed, not copied."""
    graph = model.graph
    streamed = [v for v in graph.initializers.values() if _streamable(v.const_value)]
    stashed: list[ir.TensorProtocol] = []
    for value in streamed:
        tensor = value.const_value
        assert tensor is not None
        stashed.append(tensor)
        # A reference serializes without touching the data; we write the data ourselves below.
        value.const_value = ir.ExternalTensor(
            "qdqkit-streamed", 0, tensor.nbytes, tensor.dtype, shape=ir.Shape(tensor.shape.numpy()),
            name=value.name or "",
        )
    try:
        proto = ir.serde.serialize_model(model)
    finally:
        for value, tensor in zip(streamed, stashed, strict=True):
            value.const_value = tensor
    names = {v.name for v in streamed}
    headers: dict[str, onnx.TensorProto] = {}
    kept = []
    for tensor_proto in proto.graph.initializer:
        if tensor_proto.name in names:
            header = onnx.TensorProto()
            header.CopyFrom(tensor_proto)
            header.ClearField("external_data")
            header.ClearField("data_location")
            headers[tensor_proto.name] = header
        else:
            kept.append(tensor_proto)
    del proto.graph.initializer[:]
    proto.graph.initializer.extend(kept)
    stream.write(proto.SerializeToString())
    entries = []
    for value, tensor in zip(streamed, stashed, strict=True):
        head = headers[value.name or ""].SerializeToString()
        body = head + encode_varint(_TENSOR_RAW_DATA << 3 | 2) + encode_varint(tensor.nbytes)
        total = len(body) + tensor.nbytes
        entries.append((encode_varint(_GRAPH_INITIALIZER << 3 | 2) + encode_varint(total) + body,
                        tensor))
    if not entries:
        return
    graph_length = sum(len(prefix) + tensor.nbytes for prefix, tensor in entries)
    stream.write(encode_varint(_MODEL_GRAPH << 3 | 2) + encode_varint(graph_length))
    for prefix, tensor in entries:
        stream.write(prefix)
        _write_tensor_data(stream, tensor)


def _write_tensor_data(stream: BinaryIO, tensor: ir.TensorProtocol) -> None:
    if isinstance(tensor, ir.ExternalTensor):
        array = np.asarray(tensor.numpy())
        stream.write(_little_endian(array).reshape(-1).view(np.uint8).data)
        del array
        release_mapped_tensor(tensor)  # unmap: the pages we just read stop counting
        return
    stream.write(tensor.tobytes())


def _little_endian(array: np.ndarray) -> np.ndarray:
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    return np.ascontiguousarray(array)


def size_and_streaming(model: ir.Model) -> tuple[int, bool]:
    """The initializers' total bytes and whether any is written by streaming, from one walk: a
    tensor's size is computed from its shape, which costs more than the rest of both questions."""
    total, streaming = 0, False
    for value in model.graph.initializers.values():
        tensor = value.const_value
        if tensor is None:
            continue
        nbytes = tensor.nbytes
        total += nbytes
        streaming = streaming or _streamable(tensor, nbytes)
    return total, streaming


def release_mapped(value: ir.Value | None) -> None:
    """Unmap a lazily read weight once we are done with it, so its pages stop counting."""
    release_mapped_tensor(value.const_value if value is not None else None)


def release_mapped_tensor(tensor: ir.TensorProtocol | None) -> None:
    if isinstance(tensor, ir.ExternalTensor):
        # If someone still holds a view of the pages, they go when that view does.
        with contextlib.suppress(BufferError):
            tensor.release()
