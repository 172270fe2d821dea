"""The reference side of verify: the Q/DQ model with its constant weight paths computed once.

Rule: a DequantizeLinear whose input is an integer constant (a pre-quantized weight) or a
QuantizeLinear of a float constant (a QAT weight) is replaced by the float constant it produces,
computed as the spec defines it: ``rint(w / scale)`` in float32 saturated, then
``(q - zero_point) * scale`` rounded once (``core.qdq_math``), the same IEEE operations onnxruntime's
kernels perform, so the values are bit-identical. Each weight is read, folded and released in turn,
so memory holds the folded weights once and onnxruntime reads them in place.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from qdqkit.core.constants import constant_array
from qdqkit.core.lazy_proto import release_mapped_tensor
from qdqkit.core.qdq import FLOAT_TYPES, DqSource, QdqView
from qdqkit.core.qdq_math import dequantize, quantize


def fold_constant_weights(model: ir.Model) -> int:
    """Replace every constant-input DequantizeLinear of the main graph by its value; how many."""
    graph = model.graph
    view = QdqView(graph)
    taken = set(graph.initializers)
    folded = 0
    for dq in list(view.dequantize_nodes):
        out = dq.outputs[0]
        params = view.params(dq)
        if out.is_graph_output() or params is None:
            continue
        source = view.dq_source(dq)
        q = view.quantize_of(dq) if source == DqSource.QUANTIZE else None
        if source == DqSource.CONSTANT:
            origin = dq.inputs[0]
            data = constant_array(origin)
        elif q is not None and view.is_weight_quantize(q) and view.params(q) == params:
            origin = q.inputs[0]
            floats = constant_array(origin)
            data = None if floats is None else quantize(floats, params)
            del floats
        else:
            continue
        if origin is not None:
            # The folded value replaces the mapped pages: unmap them now, not after all weights.
            release_mapped_tensor(origin.const_value)
        dtype = out.dtype if out.dtype in FLOAT_TYPES else params.scale_dtype
        if data is None or dtype not in FLOAT_TYPES or dtype == ir.DataType.BFLOAT16:
            continue
        array = dequantize(data, params, np.dtype(dtype.numpy()))
        del data
        name, n = f"{out.name or 'weight'}_folded", 1
        while name in taken:
            name, n = f"{out.name or 'weight'}_folded_{n}", n + 1
        taken.add(name)
        value = ir.Value(name=name, const_value=ir.Tensor(array, name=name))
        value.dtype, value.shape = dtype, ir.Shape(array.shape)
        graph.register_initializer(value)
        ir.convenience.replace_all_uses_with(out, value)
        folded += 1
    _drop_unused(graph)
    return folded


def _drop_unused(graph: ir.Graph) -> None:
    """Remove the Q/DQ nodes and source weights nothing reads any more, unmapping the weights."""
    for node in reversed(list(graph)):
        if not any(out.uses() or out.is_graph_output() for out in node.outputs):
            graph.remove(node, safe=True)
    for name, initializer in list(graph.initializers.items()):
        if not initializer.uses() and initializer not in graph.inputs:
            release_mapped_tensor(initializer.const_value)
            graph.initializers.pop(name)
