"""Read ``trtexec`` engine exports into an ``EngineGraph``.

Three files describe a built engine:

1. ``--exportLayerInfo`` (the engine inspector's JSON): ``{"Layers": [...], ...}``. With
   ``--profilingVerbosity=detailed`` each layer is an object (name, type, tensors, tactic); without it
   each layer is only its name. TensorRT 8.x/10.x list the network I/O as ``"Bindings"`` (names) and
   give each tensor one ``"Format/Datatype"`` string; TensorRT 11.x lists ``"I/O Tensors"`` (objects)
   and splits that string into ``"Format"`` and ``"DataType"``.
2. ``--exportProfile``: per-layer timings matched by layer name (see ``engine_profile``).
3. Optionally the end-to-end timing of the run: ``--exportTimes`` JSON, a trtexec log, or the
   ``*.profile.metadata.json`` summary that engine-explorer scripts write (see ``engine_timing``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from qdqkit.core.errors import EngineFileError
from qdqkit.trt.engine import EngineGraph, EngineLayer, EngineTensor, LayerKind, Precision
from qdqkit.trt.engine_profile import (
    LayerTiming,
    attach_profile,
    parse_profile,
    profile_measure,
    refuse_foreign_profile,
)
from qdqkit.trt.engine_timing import END_TO_END_KEY, read_timing, timing_beside
from qdqkit.trt.onnx_names import unwrap_node_names

# Layer keys this reader understands; every other key is kept in ``EngineLayer.extra``.
_KNOWN_LAYER_KEYS = frozenset(
    {"Name", "LayerType", "Inputs", "Outputs", "Origin", "TacticName"}
)
_KNOWN_TOP_KEYS = frozenset({"Layers", "Bindings", "I/O Tensors"})
_DATATYPE_KEYS = ("DataType", "Datatype", "Data Type", "Data type")

# Words of a format or data-type string -> precision. Checked in this order so that "Int8 format"
# wins over a vector-width word and "BFloat16" is not read as "Float".
_PRECISION_WORDS: tuple[tuple[str, Precision], ...] = (
    (r"\bbf(?:loat)?16\b", Precision.BF16),
    (r"\bu(?:nsigned )?int8\b", Precision.UINT8),
    (r"\bint8\b", Precision.INT8),
    (r"\bint4\b", Precision.INT4),
    (r"\bint32\b", Precision.INT32),
    (r"\bint64\b", Precision.INT64),
    (r"\bfp8\b|\be4m3\b", Precision.FP8),
    (r"\bfp4\b|\be2m1\b", Precision.FP4),
    (r"\bfp16\b|\bhalf\b", Precision.FP16),
    (r"\bfp32\b|\bfloat\b|\btf32\b", Precision.FP32),
    (r"\bbool\b", Precision.BOOL),
)
_PRECISION_PATTERNS = tuple((re.compile(p, re.IGNORECASE), prec) for p, prec in _PRECISION_WORDS)

# Exporter LayerType (lower-cased) substrings -> kind; first match wins, so the specific come first.
_KIND_RULES: tuple[tuple[str, LayerKind], ...] = (
    ("reformat", LayerKind.REFORMAT),
    ("dequantize", LayerKind.DEQUANTIZE),
    ("quantize", LayerKind.QUANTIZE),
    ("deconv", LayerKind.DECONVOLUTION),
    ("conv", LayerKind.CONVOLUTION),  # CaskConvolution, CaskGemmConvolution, ConvActPool, ...
    ("fullyconnected", LayerKind.FULLY_CONNECTED),
    ("matmul", LayerKind.MATRIX_MULTIPLY),
    ("matrixmultiply", LayerKind.MATRIX_MULTIPLY),
    ("gemm", LayerKind.MATRIX_MULTIPLY),
    ("pool", LayerKind.POOLING),  # TiledPooling, CudaPooling, CaskPooling
    ("padding", LayerKind.PADDING),
    ("pointwise", LayerKind.POINTWISE),
    ("elementwise", LayerKind.ELEMENTWISE),
    ("activation", LayerKind.ACTIVATION),
    ("shuffle", LayerKind.SHUFFLE),
    ("concat", LayerKind.CONCATENATION),
    ("slice", LayerKind.SLICE),
    ("reduce", LayerKind.REDUCE),
    ("softmax", LayerKind.SOFTMAX),
    ("norm", LayerKind.NORMALIZATION),
    ("resize", LayerKind.RESIZE),
    ("scale", LayerKind.SCALE),
    ("constant", LayerKind.CONSTANT),
    ("gather", LayerKind.GATHER),
    ("plugin", LayerKind.PLUGIN),
    ("noop", LayerKind.NOOP),
    ("myelin", LayerKind.MYELIN),
    ("foreignnode", LayerKind.MYELIN),
    ("kgen", LayerKind.MYELIN),
)

# In names-only exports the ONNX op type in a node name is the only hint of what a layer does.
# Exporters name the copies around an op after it ("reshape_before_MatMul_3", "copied_squeeze_
# after_..."): those are shuffles, so the copy words are checked before the op types.
_COPY_NAME = re.compile(
    r"^(?:reshape|transpose|squeeze|unsqueeze|flatten)_(?:before|after)_|^copied_", re.IGNORECASE)
_NAME_KIND_RULES: tuple[tuple[str, LayerKind], ...] = (
    ("padding", LayerKind.PADDING),
    ("convtranspose", LayerKind.DECONVOLUTION),
    ("conv", LayerKind.CONVOLUTION),
    ("matmul", LayerKind.MATRIX_MULTIPLY),
    ("gemm", LayerKind.MATRIX_MULTIPLY),
    ("pool", LayerKind.POOLING),
    ("softmax", LayerKind.SOFTMAX),
    ("concat", LayerKind.CONCATENATION),
    ("resize", LayerKind.RESIZE),
    ("reduce", LayerKind.REDUCE),
    ("norm", LayerKind.NORMALIZATION),
    ("myl", LayerKind.MYELIN),
    ("pad", LayerKind.PADDING),
    ("reshape", LayerKind.SHUFFLE),
    ("transpose", LayerKind.SHUFFLE),
)

_ONNX_LAYER_TAG = re.compile(r"\[ONNX Layer: (.*?)\](?=\x1f|$|\s*\[)", re.DOTALL)
_REFORMAT_NAME = re.compile(r"^Reformatting CopyNode for (?:Input|Output) Tensor \d+ to ")
_TYPE_IN_NAME = re.compile(r"\[([A-Za-z]+)\]\s*$")
# A Myelin subgraph is named "{ForeignNode[first op...last op]}": the two ops in the brackets are
# only its ends and say nothing about what the subgraph computes, so they never decide its kind.
_FOREIGN_NODE = re.compile(r"^\{ForeignNode\[.*\]\}$", re.DOTALL)
# A weight TensorRT reshapes once ("bn.running_var + (Unnamed Layer* 108) [Shuffle]"): stored
# tensors, named by dotted parameter paths, joined only with unnamed Shuffle or Constant layers.
# Such a layer reads no activation: it makes a constant.
_STORED_TENSOR = re.compile(r"^[A-Za-z_]\w*(?:\.\w+)+$")
_UNNAMED_SHUFFLE_OR_CONSTANT = re.compile(r"^\(Unnamed Layer\* \d+\) \[(?:Shuffle|Constant)\]$")
_QDQ_WORD = re.compile(r"(?:De)?[Qq]uantize(?:Linear)?")
_MARKER_NAME = re.compile(r"^\[[A-Za-z]+\d*\]$")
_HOST_COPY_NAME = re.compile(r"\[\w*HostCopy\]$", re.IGNORECASE)

# The roles of layers that are not compute (see ``non_compute_role``), in the order reports list
# them.
NON_COMPUTE_ROLES = ("Reformat", "NoOp", "Constant", "marker", "host copy")


def precision_of(text: str | None) -> Precision:
    """The element type named in a format or data-type string (``UNKNOWN`` when none is named)."""
    if not text:
        return Precision.UNKNOWN
    for pattern, precision in _PRECISION_PATTERNS:
        if pattern.search(text):
            return precision
    return Precision.UNKNOWN


def kind_of(layer_type: str | None) -> LayerKind:
    """Normalize an exporter LayerType string (``CaskConvolution`` -> ``CONVOLUTION``)."""
    lowered = (layer_type or "").lower().replace("_", "")
    for needle, kind in _KIND_RULES:
        if needle in lowered:
            return kind
    return LayerKind.OTHER


def onnx_nodes_of(name: str, metadata: object = None) -> list[str]:
    """The ONNX node names a layer fused.

    TensorRT 10+ writes them in ``Metadata`` as ``[ONNX Layer: X]`` tags (joined by a unit
    separator); older versions only join them with `` + `` in the layer name. Reformat copies
    TensorRT inserted itself fuse no ONNX node.
    """
    if isinstance(metadata, str) and "[ONNX Layer:" in metadata:
        found = [m.strip() for m in _ONNX_LAYER_TAG.findall(metadata)]
        if found:
            return list(dict.fromkeys(found))
    if _REFORMAT_NAME.match(name):
        return []
    return unwrap_node_names(name.split(" + "))


def non_compute_role(layer: EngineLayer) -> str | None:
    """Why ``layer`` does none of the network's arithmetic (one of ``NON_COMPUTE_ROLES``);
    ``None`` for a compute layer.

    The engine report, drawing and diff and the engine rules (QDQ6xx) all count "compute layers"
    by this one definition, in detailed and names-only exports alike. Not compute are:

    1. Reformats (Q/DQ ones included) and NoOps: layout and type conversions, views;
    2. Constants: kind ``Constant`` (a ``Constant`` LayerType, a ``... [Constant]`` name, or a
       weight reshaped once, see ``_makes_constant``);
    3. markers: a name that is one bracketed word and number, such as ``[trainStation1]``, or the
       ``TrainStation`` LayerType: TensorRT lists them between Myelin subgraphs; no network op is
       in them, and what time they show is waiting, not arithmetic;
    4. host copies: a name ending in ``[...HostCopy]``, such as
       ``(Unnamed Layer* 718) [NMS]_1_output[DevicetoShapeHostCopy]``: a shape tensor copied to
       the host so that the next layer's output size is known.
    """
    if layer.is_reformat:
        return "Reformat"
    if layer.kind is LayerKind.NOOP:
        return "NoOp"
    if layer.kind is LayerKind.CONSTANT:
        return "Constant"
    if _MARKER_NAME.match(layer.name) or (layer.type_name or "").lower() == "trainstation":
        return "marker"
    if _HOST_COPY_NAME.search(layer.name):
        return "host copy"
    return None


def is_compute_layer(layer: EngineLayer) -> bool:
    """Whether ``layer`` does the network's arithmetic (see ``non_compute_role``)."""
    return non_compute_role(layer) is None


def _fail(path: Path, what: str) -> EngineFileError:
    return EngineFileError(f"{path}: {what}")


def load_json(path: str | Path, what: str) -> Any:
    """Parse a JSON file, turning every failure into a one-line ``EngineFileError``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _fail(path, f"no such file (expected {what})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(path, f"cannot read it: {exc}") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise _fail(path, f"nested too deeply to be a TensorRT export; expected {what}") from None
    except json.JSONDecodeError as exc:
        raise _fail(
            path, f"not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg}); expected {what}"
        ) from None


def _tensor(path: Path, where: str, raw: object) -> EngineTensor:
    if isinstance(raw, str):
        return EngineTensor(name=raw)
    if not isinstance(raw, dict):
        raise _fail(path, f"{where} is {type(raw).__name__}, expected an object with a Name")
    name = raw.get("Name")
    if not isinstance(name, str):
        raise _fail(path, f"{where} has no Name")
    dims = raw.get("Dimensions")
    shape = tuple(int(d) for d in dims) if isinstance(dims, list) and all(
        isinstance(d, int) for d in dims
    ) else None
    if "Format/Datatype" in raw:  # TensorRT 8.x-10.x: one combined string
        fmt = str(raw["Format/Datatype"])
        return EngineTensor(name=name, precision=precision_of(fmt), format=fmt, shape=shape)
    datatype = next((str(raw[k]) for k in _DATATYPE_KEYS if k in raw), None)
    fmt_value = raw.get("Format")
    layout = str(fmt_value) if fmt_value is not None else None
    precision = precision_of(datatype)
    if precision is Precision.UNKNOWN:
        precision = precision_of(layout)
    return EngineTensor(name=name, precision=precision, format=layout, shape=shape)


def _tensor_list(path: Path, where: str, raw: object) -> list[EngineTensor]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _fail(path, f"{where} is {type(raw).__name__}, expected a list of tensors")
    return [_tensor(path, f"{where} {i}", t) for i, t in enumerate(raw)]


def _origin(name: str, raw_origin: object, kind: LayerKind) -> str | None:
    if kind not in (LayerKind.REFORMAT, LayerKind.QUANTIZE, LayerKind.DEQUANTIZE):
        return None
    if isinstance(raw_origin, str):
        return "QDQ" if raw_origin.upper() == "QDQ" else "layout"
    # Older exports have no Origin: a Reformat named after Q/DQ nodes was made from them.
    return "QDQ" if _is_qdq_name(name) else "layout"


def _is_qdq_name(name: str) -> bool:
    if _REFORMAT_NAME.match(name):
        return False
    parts = [p for p in name.split(" + ") if p.strip()]
    return bool(parts) and all(_QDQ_WORD.search(p) for p in parts)


def _kind_from_name(lowered: str) -> LayerKind:
    """The first fused part naming an op decides; a part that is a copy made around an op
    (``reshape_before_MatMul_3``) names no op, and a layer of copies only is a shuffle."""
    parts = [part.strip() for part in lowered.split(" + ") if part.strip()]
    for part in parts:
        if _COPY_NAME.search(part):
            continue
        kind = next((k for needle, k in _NAME_KIND_RULES if needle in part), None)
        if kind is not None:
            return kind
    return LayerKind.SHUFFLE if parts and all(_COPY_NAME.search(p) for p in parts) else (
        LayerKind.OTHER)


def _makes_constant(name: str) -> bool:
    parts = [part.strip() for part in name.split(" + ")]
    return any(_STORED_TENSOR.match(p) for p in parts) and all(
        _STORED_TENSOR.match(p) or _UNNAMED_SHUFFLE_OR_CONSTANT.match(p) for p in parts)


def _layer_from_name(name: str) -> EngineLayer:
    """A names-only layer: the kind is guessed from the name and says so in ``notes``."""
    origin = None
    # Checked first: the op names inside a ForeignNode's brackets may be anything, Q/DQ included.
    if _FOREIGN_NODE.match(name):
        kind = LayerKind.MYELIN
    elif _makes_constant(name):
        kind = LayerKind.CONSTANT
    elif _REFORMAT_NAME.match(name):
        kind, origin = LayerKind.REFORMAT, "layout"
    elif _is_qdq_name(name):
        kind, origin = LayerKind.REFORMAT, "QDQ"
    else:
        # "(Unnamed Layer* 7) [ElementWise]" names its type; in a fused name it is only the last op.
        copy = _COPY_NAME.search(name)
        bracket = None if " + " in name or copy else _TYPE_IN_NAME.search(name)
        lowered = name.lower()
        kind = kind_of(bracket.group(1)) if bracket else LayerKind.OTHER
        if kind is LayerKind.OTHER:
            kind = _kind_from_name(lowered)
    return EngineLayer(
        name=name,
        kind=kind,
        onnx_nodes=onnx_nodes_of(name),
        origin=origin,
        notes=["kind guessed from the name: the export has names only (build with "
               "--profilingVerbosity=detailed for types, tensors and precisions)"],
    )


def _layer(path: Path, index: int, raw: object) -> EngineLayer:
    if isinstance(raw, str):
        return _layer_from_name(raw)
    if not isinstance(raw, dict):
        raise _fail(path, f"layer {index} is {type(raw).__name__}, expected an object or a name")
    name = raw.get("Name")
    if not isinstance(name, str) or not name:
        raise _fail(path, f"layer {index} has no Name")
    where = f"layer {index} ({name!r})"
    type_name = raw.get("LayerType")
    if type_name is not None and not isinstance(type_name, str):
        raise _fail(path, f"{where}: LayerType is not a string")
    kind = kind_of(type_name)
    tactic = raw.get("TacticName") or raw.get("TacticValue")
    origin = _origin(name, raw.get("Origin"), kind)
    extra = {k: v for k, v in raw.items() if k not in _KNOWN_LAYER_KEYS}
    if origin is None and "Origin" in raw:  # only Reformats have a slot for it
        extra["Origin"] = raw["Origin"]
    return EngineLayer(
        name=name,
        kind=kind,
        onnx_nodes=onnx_nodes_of(name, raw.get("Metadata")),
        inputs=_tensor_list(path, f"{where}: input", raw.get("Inputs")),
        outputs=_tensor_list(path, f"{where}: output", raw.get("Outputs")),
        type_name=type_name,
        origin=origin,
        tactic=str(tactic) if tactic is not None else None,
        device="DLA" if "dla" in (type_name or "").lower() else "GPU",
        extra=extra,
    )


def _io_from_bindings(names: list[str], layers: list[EngineLayer]) -> tuple[
    list[EngineTensor], list[EngineTensor]
]:
    """Split TensorRT 8.x/10.x binding names into inputs and outputs using the layers' tensors."""
    produced = {t.name: t for layer in layers for t in layer.outputs}
    consumed = {t.name: t for layer in layers for t in layer.inputs}
    inputs, outputs = [], []
    for name in names:
        if name in produced:
            outputs.append(produced[name])
        elif name in consumed:
            inputs.append(consumed[name])
        else:  # names-only export: no tensors to decide from; keep the declared order
            (inputs if not inputs else outputs).append(EngineTensor(name=name))
    return inputs, outputs


def _io_tensor_11(path: Path, index: int, raw: object) -> tuple[str, EngineTensor]:
    tensor = _tensor(path, f"I/O tensor {index}", raw)
    assert isinstance(raw, dict)  # _tensor rejected everything else
    profiles = raw.get("ProfileInfo")
    if tensor.format is None and isinstance(profiles, list) and profiles:
        first = profiles[0]
        if isinstance(first, dict) and "Format" in first:
            tensor.format = str(first["Format"])
            if tensor.precision is Precision.UNKNOWN:
                tensor.precision = precision_of(tensor.format)
    mode = str(raw.get("IOMode", "")).lower()
    return mode, tensor


def parse_engine_graph(data: object, source: str | Path) -> EngineGraph:
    """Build an ``EngineGraph`` from already-parsed ``--exportLayerInfo`` JSON."""
    path = Path(source)
    if isinstance(data, list) and data and isinstance(data[0], dict) and "count" in data[0]:
        raise _fail(path, "this is an --exportProfile file (timings), not --exportLayerInfo; "
                    "pass it with --profile")
    if not isinstance(data, dict) or "Layers" not in data:
        raise _fail(path, "no \"Layers\" list: expected the JSON that trtexec --exportLayerInfo writes")
    raw_layers = data["Layers"]
    if not isinstance(raw_layers, list):
        raise _fail(path, "\"Layers\" is not a list")
    layers = [_layer(path, i, raw) for i, raw in enumerate(raw_layers)]
    metadata: dict[str, Any] = {k: v for k, v in data.items() if k not in _KNOWN_TOP_KEYS}
    metadata["names_only"] = bool(raw_layers) and all(isinstance(r, str) for r in raw_layers)
    if "I/O Tensors" in data:
        raw_io = data["I/O Tensors"]
        if not isinstance(raw_io, list):
            raise _fail(path, "\"I/O Tensors\" is not a list")
        metadata["schema"] = "TensorRT 11.x"
        inputs: list[EngineTensor] = []
        outputs: list[EngineTensor] = []
        for i, raw in enumerate(raw_io):
            mode, tensor = _io_tensor_11(path, i, raw)
            (outputs if mode.startswith("out") else inputs).append(tensor)
    else:
        metadata["schema"] = "TensorRT 8.x-10.x"
        bindings = data.get("Bindings", [])
        if not isinstance(bindings, list) or not all(isinstance(b, str) for b in bindings):
            raise _fail(path, "\"Bindings\" is not a list of tensor names")
        inputs, outputs = _io_from_bindings(bindings, layers)
    return EngineGraph(layers=layers, inputs=inputs, outputs=outputs, source=str(path),
                       metadata=metadata)


def read_profile(path: str | Path) -> list[LayerTiming]:
    return parse_profile(load_json(path, "trtexec --exportProfile JSON"), path)


def _note_profile_coverage(graph: EngineGraph, timings: list[LayerTiming]) -> None:
    """Record how much of the profile's time belongs to records that name no layer: reports
    must say what they leave out."""
    unmatched = set(graph.metadata.get("unmatched_profile_records") or [])
    graph.metadata["profile_measure"] = profile_measure(timings)
    graph.metadata["profile_records"] = len(timings)
    graph.metadata["profile_ms"] = round(sum(t.best_ms or 0.0 for t in timings), 6)
    graph.metadata["unmatched_profile_ms"] = round(
        sum(t.best_ms or 0.0 for t in timings if t.name in unmatched), 6)


def read_engine_graph(
    path: str | Path, profile: str | Path | None = None, timing: str | Path | None = None
) -> EngineGraph:
    """Read ``--exportLayerInfo`` JSON and, optionally, ``--exportProfile`` timings.

    Layers are timed by the profile's ``averageMs`` (``medianMs`` when a record lacks it, see
    ``LayerTiming.best_ms``); the field used is ``metadata["profile_measure"]``. ``timing`` is the
    end-to-end timing of the run (see ``engine_timing.read_timing``); when it is not given, the
    ``*.metadata.json`` summary beside the profile is used if there is one.

    A profile whose records mostly name no layer of the graph is of another engine and raises
    ``EngineFileError``; a file that cannot be read at all is reported before that mismatch.
    """
    graph = parse_engine_graph(load_json(path, "trtexec --exportLayerInfo JSON"), path)
    timings: list[LayerTiming] = []
    if profile is not None:
        timings = read_profile(profile)
        attach_profile(graph, timings, str(profile))
        _note_profile_coverage(graph, timings)
        if timing is None:
            timing = timing_beside(Path(profile))
    if timing is not None:
        graph.metadata[END_TO_END_KEY] = read_timing(timing)
    if profile is not None:
        refuse_foreign_profile(graph, timings, profile, path)
    return graph


__all__ = [
    "NON_COMPUTE_ROLES", "LayerTiming", "attach_profile", "is_compute_layer", "kind_of",
    "load_json", "non_compute_role", "onnx_nodes_of", "parse_engine_graph", "parse_profile",
    "precision_of", "read_engine_graph", "read_profile",
]
