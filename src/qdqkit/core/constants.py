"""Reading constant tensors however a producer spelled them.

Exporters put scales and weights in initializers, in ``Constant`` nodes, or behind ``Identity`` and
``Cast`` nodes (fp16 scales cast up, TF-style identity chains). ``constant_array`` follows those
forms to the numbers; anything computed at run time is not a constant and yields ``None``.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir

# Ops that pass a constant through unchanged (or only re-typed); followed when looking for a value.
_PASS_THROUGH_OPS = frozenset({"Identity", "Cast", "Constant"})


def _pass_through_chain(value: ir.Value | None) -> tuple[ir.Value, list[ir.Node]] | None:
    """Follow Identity/Cast back to an initializer or a Constant node's output.

    Returns that source value and the Cast nodes met on the way (outermost first), or None when the
    value is computed at run time.
    """
    casts: list[ir.Node] = []
    for _ in range(16):
        if value is None:
            return None
        if value.const_value is not None:
            return value, casts
        node = value.producer()
        if node is None or node.domain not in ("", "ai.onnx") or node.op_type not in _PASS_THROUGH_OPS:
            return None
        if node.op_type == "Constant":
            return value, casts
        if node.op_type == "Cast":
            casts.append(node)
        value = node.inputs[0] if node.inputs else None
    return None


def _cast_target(cast: ir.Node) -> ir.DataType:
    return ir.DataType(cast.attributes["to"].as_int())


def constant_array(value: ir.Value | None) -> np.ndarray | None:
    """The numpy value of ``value`` if it is a build-time constant, else ``None``."""
    chain = _pass_through_chain(value)
    return _chain_array(*chain) if chain is not None else None


def constant_array_and_dtype(
    value: ir.Value | None,
) -> tuple[np.ndarray | None, ir.DataType | None]:
    """``(constant_array(value), constant_dtype(value))`` from one walk back to the source: a
    Q/DQ model has two small constants per Q/DQ (scale, zero point), and both facts of each are
    read."""
    chain = _pass_through_chain(value)
    if chain is None:
        return None, value.dtype if value is not None else None
    return _chain_array(*chain), _chain_dtype(*chain)


def _chain_array(source: ir.Value, casts: list[ir.Node]) -> np.ndarray | None:
    """The value at the end of a pass-through chain, cast as the chain casts it."""
    if source.const_value is not None:
        array: np.ndarray | None = _to_numpy(source.const_value)
    else:
        producer = source.producer()
        array = _constant_node_value(producer) if producer is not None else None
    if array is None:
        return None
    for cast in reversed(casts):
        array = array.astype(_cast_target(cast).numpy())
    return array


def is_constant(value: ir.Value | None) -> bool:
    return constant_source(value) is not None


def constant_source(value: ir.Value | None) -> ir.Value | None:
    """The initializer or Constant-node output that ``value`` is a pass-through of, if any."""
    chain = _pass_through_chain(value)
    return chain[0] if chain is not None else None


# Little-endian numpy dtypes of the ONNX element types stored one or more whole bytes a value in
# raw_data, by TensorProto.data_type: read straight from the bytes (as onnx-ir does), skipping
# onnx-ir's per-call dispatch, which costs more than the read for the scalars of a Q/DQ model.
_RAW_DTYPES: dict[int, np.dtype] = {
    int(t): np.dtype(t.numpy()).newbyteorder("<")
    for t in (ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.INT8,
              ir.DataType.UINT8, ir.DataType.INT16, ir.DataType.UINT16, ir.DataType.INT32,
              ir.DataType.UINT32, ir.DataType.INT64, ir.DataType.UINT64)
}


def tensor_array(tensor: ir.TensorProtocol) -> np.ndarray:
    """``tensor.numpy()``, read straight from the bytes of a tensor stored as raw data."""
    return _to_numpy(tensor)


def _to_numpy(tensor: ir.TensorProtocol) -> np.ndarray:
    if type(tensor) is ir.serde.TensorProtoTensor:
        proto = tensor.raw
        dtype = _RAW_DTYPES.get(proto.data_type)
        if (dtype is not None and proto.data_location != onnx.TensorProto.EXTERNAL
                and proto.HasField("raw_data")):
            # ``dims[:]`` is a list, which numpy reads twice as fast as the repeated field.
            return np.frombuffer(proto.raw_data, dtype=dtype).reshape(proto.dims[:])
    array = tensor.numpy()
    # onnx-ir returns ml_dtypes arrays for int4/fp8; keep them, callers check dtype by ir.DataType.
    return np.asarray(array)


def _constant_node_value(node: ir.Node) -> np.ndarray | None:
    # The attributes' plain dict: the UserDict's own ``in`` and ``[]`` are Python-level calls.
    attrs = node.attributes.data
    if "value" in attrs:
        return _to_numpy(_tensor_attr(attrs["value"]))
    if "value_float" in attrs:
        return np.array(attrs["value_float"].as_float(), dtype=np.float32)
    if "value_floats" in attrs:
        return np.array(attrs["value_floats"].as_floats(), dtype=np.float32)
    if "value_int" in attrs:
        return np.array(attrs["value_int"].as_int(), dtype=np.int64)
    if "value_ints" in attrs:
        return np.array(attrs["value_ints"].as_ints(), dtype=np.int64)
    return None


def constant_dtype(value: ir.Value | None) -> ir.DataType | None:
    """The ONNX element type of a constant, resolving through Constant/Identity/Cast."""
    chain = _pass_through_chain(value)
    if chain is None:
        return value.dtype if value is not None else None
    return _chain_dtype(*chain)


def _chain_dtype(source: ir.Value, casts: list[ir.Node]) -> ir.DataType:
    """The element type at the end of a pass-through chain: the outermost cast's, if any."""
    if casts:
        return _cast_target(casts[0])
    if source.const_value is not None:
        return source.const_value.dtype
    node = source.producer()
    attrs = node.attributes.data if node is not None else {}
    if "value" in attrs:
        return _tensor_attr(attrs["value"]).dtype
    if "value_float" in attrs or "value_floats" in attrs:
        return ir.DataType.FLOAT
    return ir.DataType.INT64


def _tensor_attr(attr: ir.Attr) -> ir.TensorProtocol:
    # ``Attr.as_tensor`` checks the value against a runtime Protocol, which costs ~0.1 ms a call:
    # too slow for models with thousands of scales in Constant nodes. The type tag says enough.
    if attr.type == ir.AttributeType.TENSOR:
        return attr.value
    return attr.as_tensor()


_NONDETERMINISTIC = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial"}
)


def constant_derived_values(graph: ir.Graph) -> set[ir.Value]:
    """Values computed only from constants (initializers, Constant nodes), in one forward sweep."""
    constant: set[ir.Value] = set(graph.initializers.values())
    for node in graph:
        op_type = node.op_type
        if op_type == "Constant":
            constant.update(node.outputs)
            continue
        if op_type in _NONDETERMINISTIC:
            continue
        # Constant when it reads at least one value and every value it reads is constant.
        read = False
        for value in node.inputs:
            if value is None:
                continue
            if value not in constant:
                break
            read = True
        else:
            if read:
                constant.update(node.outputs)
    return constant


# Little-endian IEEE floats: their numpy bytes are the ONNX raw_data as they are.
_PROTO_FLOAT_TYPES: dict[np.dtype, int] = {
    np.dtype("<f2"): onnx.TensorProto.FLOAT16,
    np.dtype("<f4"): onnx.TensorProto.FLOAT,
    np.dtype("<f8"): onnx.TensorProto.DOUBLE,
}


def float_tensor(array: np.ndarray, name: str | None = None) -> ir.TensorProtocol:
    """``ir.Tensor(array, name=name)``, held as the TensorProto onnx-ir would write for it when
    ``array`` is float16/32/64: onnx-ir then writes it with one copy of that message instead of
    converting the array at save time, about half the cost for the thousands of small weights and
    biases a fold makes in a large model. Other types get an ``ir.Tensor``."""
    data_type = _PROTO_FLOAT_TYPES.get(array.dtype)
    if data_type is None:
        return ir.Tensor(array, name=name)
    proto = onnx.TensorProto(data_type=data_type, dims=array.shape, raw_data=array.tobytes())
    if name:
        proto.name = name
    return ir.TensorProtoTensor(proto)


def new_constant(name: str | None, array: np.ndarray) -> ir.Value:
    """A value holding ``array``, with its shape and type declared so shape-reading steps (MACs,
    the predictor) see them before the model is saved and read again."""
    tensor = ir.Tensor(array)
    return ir.Value(name=name, shape=ir.Shape(array.shape), type=ir.TensorType(tensor.dtype),
                    const_value=tensor)


def replace_constant_input(graph: ir.Graph, node: ir.Node, index: int, array: np.ndarray,
                           suffix: str) -> None:
    """Give ``node`` input ``index`` a new initializer holding ``array``, named after the old one
    plus ``suffix``; the old one goes when nothing else reads it (a shared original stays)."""
    old = node.inputs[index]
    assert old is not None
    base = f"{old.name}_{suffix}"
    name, n = base, 1
    while name in graph.initializers:
        name, n = f"{base}_{n}", n + 1
    value = new_constant(name, array)
    assert value.const_value is not None
    value.const_value.name = name
    graph.register_initializer(value)
    node.replace_input_with(index, value)
    if not old.uses() and not old.is_graph_output() and old.name in graph.initializers:
        graph.initializers.pop(old.name or "")
