"""Loading and saving ONNX models, with the checks that keep bad or hostile files out.

Models load into onnx-ir (use-def links, lazily read external data). Before anything else looks at a
model, ``load_model`` makes sure the file parses, has a graph, and that every external-data reference
stays inside the model's own folder and fits in its file: a relative path such as ``../../etc/passwd``
is how a malicious model would read other files.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import onnx
import onnx_ir as ir
from google.protobuf.message import DecodeError

from qdqkit.core import lazy_proto
from qdqkit.core.atomic import OutputSet
from qdqkit.core.errors import ModelLoadError
from qdqkit.core.validation import validate_model, validate_proto

_LFS_POINTER = b"version https://git-lfs.github.com/spec/"
# Above this, protobuf cannot hold the model in one message; weights go to a side file.
PROTOBUF_LIMIT_BYTES = 2_000_000_000 - 64 * 1024 * 1024
_PROTOBUF_LIMIT_BYTES = PROTOBUF_LIMIT_BYTES


def load_model(
    path: str | os.PathLike[str], *, lazy_weights: bool = False, validate: bool = False
) -> ir.Model:
    """Load ``path`` as an onnx-ir model, or raise ``ModelLoadError`` saying what is wrong.

    With ``lazy_weights``, initializers of 1 MiB and more are not read into memory: they become
    references into the model file, mapped only when used (see ``core.lazy_proto``). With
    ``validate``, the graph is validated up front (``core.validation``): the ONNX checker on the
    parsed protobuf, before it becomes onnx-ir objects, then the checks on the graph.
    """
    model_path = Path(path)
    if not model_path.exists():
        raise ModelLoadError(f"{model_path}: no such file")
    if model_path.is_dir():
        raise ModelLoadError(f"{model_path}: is a folder; give the path of an .onnx file")
    if not model_path.is_file():
        raise ModelLoadError(
            f"{model_path}: is not a regular file (a FIFO, socket or device); give an .onnx file"
        )
    if model_path.stat().st_size == 0:
        raise ModelLoadError(f"{model_path}: the file is empty")
    with open(model_path, "rb") as stream:
        head = stream.read(len(_LFS_POINTER))
    if head == _LFS_POINTER:
        raise ModelLoadError(
            f"{model_path}: is a Git LFS pointer, not the model; fetch it with 'git lfs pull'"
        )
    checked: list[bool] = []

    def check(proto: onnx.ModelProto, data: bytes | None = None) -> None:
        checked.append(validate_proto(proto, str(model_path), data))

    try:
        hook = check if validate else None
        model = (lazy_proto.load_lazily(model_path, hook) if lazy_weights else None) \
            or _load_whole(model_path, hook)
    except ModelLoadError:
        raise
    except (DecodeError, ValueError, RuntimeError, OSError) as exc:
        twice = _defined_twice(model_path) if not isinstance(exc, DecodeError) else None
        if twice is not None:
            raise ModelLoadError(f"{model_path}: {twice}") from None
        raise ModelLoadError(
            f"{model_path}: not a readable ONNX model (truncated, corrupt or another format): "
            f"{_first_line(exc)}"
        ) from None
    except Exception as exc:
        raise ModelLoadError(
            f"{model_path}: could not be parsed as an ONNX model: {_first_line(exc)}"
        ) from None
    _check_graph(model, model_path)
    check_external_data(model, model_path)
    if validate:
        validate_model(model, str(model_path), run_checker=not all(checked))
    return model


def _load_whole(
    model_path: Path, check: Callable[[onnx.ModelProto, bytes | None], None] | None
) -> ir.Model:
    # As ir.load, minus its own pass over every tensor to set the external-data folder:
    # check_external_data visits the same tensors anyway and sets it there. The file's bytes are
    # read here, as onnx.load would (same format choice by extension, same parser), so that the
    # checker can be given them as they are instead of a copy of the graph.
    fmt = onnx.serialization.registry.get_format_from_file_extension(model_path.suffix)
    data = model_path.read_bytes()
    proto = onnx.load_model_from_string(data, format=fmt or "protobuf")
    if check is not None:
        check(proto, data if (fmt or "protobuf") == "protobuf" else None)
    del data  # not held while the graph is built
    return ir.serde.deserialize_model(proto)


def _defined_twice(model_path: Path) -> str | None:
    """What breaks ONNX's one-definition-per-name rule in the main graph, if anything: a file
    that parses but names a tensor twice (an initializer and a node output, or two node outputs;
    some quantizers write such files) cannot become a graph, and the reason is worth saying."""
    try:
        graph = onnx.load(model_path, load_external_data=False).graph
    except Exception:  # unreadable after all: the caller's own message stands
        return None
    defined: dict[str, str] = {v.name: "a graph input" for v in graph.input}
    defined.update((t.name, "an initializer") for t in graph.initializer)
    for index, node in enumerate(graph.node):
        label = f"node '{node.name}'" if node.name else f"the {node.op_type} node #{index}"
        for name in node.output:
            if not name:
                continue
            if name in defined:
                return (f"tensor '{name}' is defined twice, by {defined[name]} and by {label}; "
                        "ONNX allows one definition per name: rename one of them where the model "
                        "is made")
            defined[name] = label
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def _check_graph(model: ir.Model, model_path: Path) -> None:
    if len(model.graph) == 0:
        raise ModelLoadError(
            f"{model_path}: the model has no nodes (truncated, or not an ONNX model)"
        )
    if "" not in model.opset_imports and "ai.onnx" not in model.opset_imports:
        raise ModelLoadError(f"{model_path}: the model imports no default ONNX opset")


_TENSOR, _GRAPH, _GRAPHS = ir.AttributeType.TENSOR, ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS


def _external_tensors(model: ir.Model) -> list[ir.ExternalTensor]:
    found: list[ir.ExternalTensor] = []
    # One walk over the nodes finds both tensor attributes and subgraphs (graph.subgraphs()
    # would walk them a second time). Initializers and attributes are UserDicts: their ``data``
    # dicts iterate several times faster than the mapping views, which every node pays for.
    pending: list[ir.Graph] = [model.graph]
    while pending:
        graph = pending.pop(0)
        for value in graph.initializers.data.values():
            if isinstance(value.const_value, ir.ExternalTensor):
                found.append(value.const_value)
        for node in graph:
            for attr in node.attributes.data.values():
                kind = attr.type
                if kind is _TENSOR:
                    if isinstance(attr.value, ir.ExternalTensor):
                        found.append(attr.value)
                elif kind is _GRAPH:
                    pending.append(attr.value)
                elif kind is _GRAPHS:
                    pending.extend(attr.value)
    return found


def check_external_data(model: ir.Model, model_path: Path) -> None:
    """Refuse external data that escapes the model's folder, is missing, or is too short."""
    folder = model_path.resolve().parent
    sizes: dict[Path, int] = {}
    for tensor in _external_tensors(model):
        tensor.base_dir = folder
        location = Path(tensor.location)
        where = f"{model_path}: tensor '{tensor.name}' keeps its data in '{tensor.location}'"
        if location.is_absolute():
            raise ModelLoadError(
                f"{where}, an absolute path; external data must sit beside the model"
            )
        data_path = (folder / location).resolve()
        if folder not in data_path.parents:
            raise ModelLoadError(
                f"{where}, outside the model's folder; refusing to read it "
                "(move the data file beside the model)"
            )
        if data_path not in sizes:
            if data_path.exists() and not data_path.is_file():
                raise ModelLoadError(
                    f"{where}, which is not a regular file (a FIFO, socket, device or folder); "
                    "external data must be a file beside the model"
                )
            if not data_path.is_file():
                raise ModelLoadError(
                    f"{where}, which is missing; copy the data file beside the model"
                )
            sizes[data_path] = data_path.stat().st_size
        end = (tensor.offset or 0) + (tensor.length if tensor.length is not None else 0)
        if end > sizes[data_path]:
            raise ModelLoadError(
                f"{where} at bytes up to {end}, but that file has only {sizes[data_path]} bytes "
                "(truncated data file)"
            )


def model_size_bytes(model: ir.Model) -> int:
    return sum(
        v.const_value.nbytes for v in model.graph.initializers.values() if v.const_value is not None
    )


def _write_whole(model: ir.Model, path: Path) -> None:
    # The bytes ir.save writes for a model without external data, minus onnx.save's extra walk
    # over every tensor of every node looking for external data to write (there is none here).
    data = ir.serde.serialize_model(model).SerializeToString()
    with open(path, "wb") as f:
        f.write(data)


def stage_model(outputs: OutputSet, model: ir.Model, target: Path) -> None:
    """Stage ``model`` to be written at ``target`` as part of an atomic output set.

    Models too large for one protobuf message keep their weights in ``<target>.data`` beside it.
    """
    target = Path(target)
    size, streaming = lazy_proto.size_and_streaming(model)
    if size < _PROTOBUF_LIMIT_BYTES:
        if streaming:
            # Large or external weights are streamed to the file instead of copied into a proto.
            def stream(tmp: Path) -> None:
                with open(tmp, "wb") as f:
                    lazy_proto.write_streaming(model, f)

            outputs.stage_writer(target, stream)
        else:
            outputs.stage_writer(target, lambda tmp: _write_whole(model, tmp))
        return
    data_name = target.name + ".data"

    def write(tmp: Path) -> None:
        # ir.save writes the data file under the given name beside tmp; stage it too.
        ir.save(model, tmp, external_data=data_name)

    outputs.stage_writer(target, write)
    data_path = target.with_name(data_name)
    staged_data = data_path.with_name(data_name)
    outputs.stage_writer(data_path, lambda tmp: os.replace(staged_data, tmp))


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes, read in 4 MiB pieces (``sha256sum`` prints the same)."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()
