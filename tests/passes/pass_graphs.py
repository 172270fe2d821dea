"""Helpers for pass tests: build a model with onnx.helper, run a pass, compare in onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
from onnx import TensorProto, helper, numpy_helper

from qdqkit.core.numerics import make_session


def model(nodes: list[onnx.NodeProto], inits: dict[str, np.ndarray], inputs: dict[str, list[int]],
          outputs: list[str], opset: int = 13) -> ir.Model:
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in inits.items()],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    proto.ir_version = 8
    return ir.serde.deserialize_model(proto)


def run(m: ir.Model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return make_session(m).run(None, feeds)  # type: ignore[no-any-return]


def ops(m: ir.Model) -> list[str]:
    return [n.op_type for n in m.graph]
