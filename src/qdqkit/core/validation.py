"""Up-front validation: an invalid graph is refused, naming the node, before any command works on it.

1. Our own linear checks first, for the clearest messages: every node reads only defined tensors
   (graph inputs, initializers, earlier outputs); the graph has no cycle (a graph that is merely
   out of order is sorted, as onnxruntime accepts it); node names are unique; every initializer's
   stored data fits its shape (no negative dimensions, no shape larger than the data).
2. Then the ONNX checker on the graph without its weights: each operator exists at the model's opset,
   its attributes and input counts follow the schema (QuantizeLinear at opset 9, ``axis`` on
   DequantizeLinear at opset 11, an empty required input), Constant tensors fit their shapes.
   Weights are declared as typed inputs, so no weight is read or copied for the check.
"""

from __future__ import annotations

import math
import re

import onnx
import onnx_ir as ir

from qdqkit.core.errors import ModelLoadError

_FIX = "fix the exporter or re-export the model"
_QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")
_CONTEXT = re.compile(r"Name:\s*(\S*)\s+OpType:\s*(\S+)", re.IGNORECASE)
_TYPED_FIELDS = ("float_data", "int32_data", "int64_data", "double_data", "uint64_data",
                 "string_data")


def validate_model(model: ir.Model, where: str, *, run_checker: bool = True) -> None:
    """Raise ``ModelLoadError`` naming the first invalid node or tensor of ``model``.

    ``run_checker=False`` when the file's protobuf already went through ``validate_proto`` (as
    ``load_model(..., validate=True)`` does, which is cheaper than serializing the graph again).
    """
    graph = model.graph
    _check_order(graph, where)
    _check_names(graph, where)
    check_initializer_data(graph, where)
    if run_checker:
        _run_checker(_skeleton(model), where)


def validate_proto(proto: onnx.ModelProto, where: str, data: bytes | None = None) -> bool:
    """The ONNX checker on a just-parsed model, without its weights (see ``validate_model``).

    Returns False when the checker refuses the graph: a node reading a tensor defined later or
    nowhere is one reason, and the graph checks on the IR name that better (or sort the graph),
    so ``validate_model`` then runs them and the checker again, which reports what is left. A
    valid graph is not walked in Python here at all.

    ``data``: the bytes ``proto`` was parsed from. When the model needs none of the skeleton's
    allowances (IR 4 or later, every input and output a tensor with a shape field), the checker
    reads them as they are, which costs half as much as building the skeleton; the weights are
    then checked too, so any refusal is retried on the skeleton before it counts.
    """
    if data is not None and _needs_no_allowance(proto):
        try:
            _run_checker(data, where)
            return True
        except ModelLoadError:
            pass
    skeleton = onnx.ModelProto(ir_version=max(proto.ir_version, 4))
    skeleton.opset_import.extend(proto.opset_import)
    skeleton.functions.extend(proto.functions)
    graph, source = skeleton.graph, proto.graph
    graph.name = source.name or "graph"
    graph.node.extend(source.node)
    graph.input.extend(source.input)
    graph.output.extend(source.output)
    for info in (*graph.input, *graph.output):
        if info.type.HasField("tensor_type"):
            info.type.tensor_type.shape.SetInParent()
        elif not info.HasField("type"):
            info.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
            info.type.tensor_type.shape.SetInParent()
    declared = {value.name for value in source.input}
    # Initializers become typed inputs (no weight data is copied or checked here), appended as
    # encoded bytes: protobuf concatenates a repeated field met twice, so the checker reads one
    # graph whose inputs end with them. Building ValueInfoProto objects one by one costs 3x more.
    typed = b"".join(
        _typed_input_bytes(tensor.name, tensor.data_type or onnx.TensorProto.FLOAT)
        for tensor in source.initializer
        if tensor.name not in declared
    )
    encoded = skeleton.SerializeToString()
    if typed:
        encoded += _field(_MODEL_GRAPH, typed)
    try:
        _run_checker(encoded, where)
    except ModelLoadError:
        return False
    return True


def _needs_no_allowance(proto: onnx.ModelProto) -> bool:
    """Whether the checker accepts ``proto`` as the skeleton would: IR 4 or later (initializers
    need not be inputs) and every graph input and output typed as a tensor with a shape field."""
    if proto.ir_version < 4:
        return False
    graph = proto.graph
    for info in (*graph.input, *graph.output):
        kind = info.type
        if not kind.HasField("tensor_type") or not kind.tensor_type.HasField("shape"):
            return False
    return True


# Field numbers: ModelProto.graph 7; GraphProto.input 11; ValueInfoProto.name 1, .type 2;
# TypeProto.tensor_type 1; TypeProto.Tensor.elem_type 1 (varint), .shape 2.
_MODEL_GRAPH, _GRAPH_INPUT = 7, 11


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # a negative int32 enum is written as its 64-bit two's complement
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _typed_input_bytes(name: str, elem_type: int) -> bytes:
    """A GraphProto.input entry: ``name`` as a tensor of ``elem_type`` with an empty shape."""
    tensor_type = b"\x08" + _varint(elem_type) + b"\x12\x00"
    info = _field(1, name.encode()) + _field(2, _field(1, tensor_type))
    return _field(_GRAPH_INPUT, info)


def _label(node: ir.Node) -> str:
    return f"{node.op_type} '{node.name}'" if node.name else f"an unnamed {node.op_type}"


def _check_order(graph: ir.Graph, where: str) -> None:
    seen: set[ir.Node] = set()  # the nodes before the current one
    defined = set(graph.inputs) | set(graph.initializers.values())
    unsorted = False
    for node in graph:
        for value in node.inputs:
            if value is None or value in defined:
                continue
            producer = value.producer()
            if producer is None:
                if value.const_value is not None or value.name in graph.initializers:
                    continue
                raise ModelLoadError(
                    f"{where}: {_label(node)} reads '{value.name}', which no node, input or "
                    f"initializer defines; {_FIX}"
                )
            if producer.graph is graph and producer not in seen:
                unsorted = True
        seen.add(node)
    if unsorted:
        try:
            graph.sort()
        except ValueError:
            raise ModelLoadError(f"{where}: {_cycle_text(graph)}; {_FIX}") from None


def _cycle_text(graph: ir.Graph) -> str:
    """Name one node on a cycle: Kahn's algorithm leaves exactly the cyclic part unvisited."""
    nodes = list(graph)
    waiting = {node: 0 for node in nodes}
    for node in nodes:
        for value in node.inputs:
            producer = value.producer() if value is not None else None
            if producer in waiting:
                waiting[node] += 1
    ready = [node for node, count in waiting.items() if count == 0]
    while ready:
        node = ready.pop()
        del waiting[node]
        for out in node.outputs:
            for use in out.uses():
                if use.node in waiting:
                    waiting[use.node] -= 1
                    if waiting[use.node] == 0:
                        ready.append(use.node)
    stuck = next((node for node in nodes if node in waiting), None)
    if stuck is None:
        return "the graph cannot be ordered"
    return f"{_label(stuck)} is on a cycle (it reads, through other nodes, its own output)"


def _check_names(graph: ir.Graph, where: str) -> None:
    seen: set[str] = set()
    for node in graph:
        name = node.name
        if name:
            if name in seen:
                raise ModelLoadError(
                    f"{where}: two nodes are named '{name}'; node names must be unique "
                    "(TensorRT addresses layers by name); rename one"
                )
            seen.add(name)


def check_initializer_data(graph: ir.Graph, where: str) -> None:
    """Refuse initializers whose stored data does not match their shape (a truncated writer)."""
    bitwidths: dict[int, int] = {}  # by data_type: building the enum member costs ~2 us a call
    for value in graph.initializers.values():
        tensor = value.const_value
        if not isinstance(tensor, ir.serde.TensorProtoTensor):
            continue
        proto = tensor.raw
        # From the proto's own fields: going through tensor.shape costs ~20 us a tensor. Read
        # once, as a list: each access to the repeated field builds a new wrapper.
        dims = proto.dims[:]
        if any(d < 0 for d in dims):
            raise ModelLoadError(
                f"{where}: initializer '{value.name}' has negative dimensions {dims}; {_FIX}"
            )
        count = math.prod(dims)
        data_type = proto.data_type
        bitwidth = bitwidths.get(data_type)
        if bitwidth is None:
            try:
                bitwidth = bitwidths[data_type] = ir.DataType(data_type).bitwidth
            except (ValueError, TypeError):
                raise ModelLoadError(
                    f"{where}: initializer '{value.name}' has unknown element type {data_type}"
                ) from None
        expected = (count * bitwidth + 7) // 8
        raw = proto.raw_data
        if raw or proto.HasField("raw_data") or count == 0:
            stored, needed, unit = len(raw), expected, "bytes"
        else:
            stored = max(len(getattr(proto, f)) for f in _TYPED_FIELDS)
            # complex numbers take two values each; everything else one.
            needed = count * (2 if data_type in (14, 15) else 1)
            if data_type in (onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16) or bitwidth < 8:
                needed = stored  # packed several to an int32: the checker below counts these
            unit = "values"
        if stored != needed:
            raise ModelLoadError(
                f"{where}: initializer '{value.name}' holds {stored} {unit} but its shape "
                f"{dims} needs {needed}; the file is truncated or was written "
                "incompletely"
            )


def _skeleton(model: ir.Model) -> onnx.ModelProto:
    """The model without weight data: initializers become typed graph inputs."""
    graph = model.graph
    proto = onnx.ModelProto(ir_version=max(model.ir_version, 4))
    for domain, version in model.opset_imports.items():
        proto.opset_import.add(domain=domain, version=version)
    g = proto.graph
    g.name = graph.name or "graph"
    names = set()
    for value in graph.inputs:
        g.input.append(_typed(value))
        names.add(value.name)
    for name, value in graph.initializers.items():
        if name not in names:
            g.input.append(_typed(value))
    for node in graph:
        g.node.append(ir.serde.serialize_node(node))
    for value in graph.outputs:
        g.output.append(_typed(value))
    for function in model.functions.values():
        proto.functions.append(ir.serde.serialize_function(function))
    return proto


def _typed(value: ir.Value) -> onnx.ValueInfoProto:
    info = ir.serde.serialize_value(value)
    if info.type.HasField("tensor_type"):
        info.type.tensor_type.shape.SetInParent()  # the checker requires the field, not its dims
    elif not info.HasField("type"):
        info.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
        info.type.tensor_type.shape.SetInParent()
    return info


def _run_checker(skeleton: onnx.ModelProto | bytes, where: str) -> None:
    try:
        onnx.checker.check_model(skeleton)
    except onnx.checker.ValidationError as exc:
        text = " ".join(str(exc).split())
        reason = text.split(" ==> Context")[0].strip().rstrip(".")
        match = _CONTEXT.search(text)
        node = f" ({match.group(2)} '{match.group(1)}')" if match and match.group(1) else ""
        fix = _FIX
        if "attribute: axis" in reason and match and match.group(2) in _QDQ_OPS:
            # onnxruntime's quantize_static writes per-channel Q/DQ into opset 10-12 models.
            fix = ("per-channel Q/DQ needs opset 13 or later: convert the float model with "
                   "onnx.version_converter.convert_version(model, 13) and quantize it again")
        raise ModelLoadError(f"{where}: invalid model{node}: {reason}; {fix}") from None
    except Exception as exc:  # the checker's own limits (e.g. a proto over 2 GB of nodes)
        raise ModelLoadError(f"{where}: cannot be validated: {exc}") from None
