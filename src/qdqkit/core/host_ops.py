"""Running a model through ops onnxruntime lacks, with a numpy forward the user supplies.

A TensorRT plugin (``EfficientNMS_TRT``, a custom domain) has no onnxruntime kernel. Given
``{op_type: forward}``, the model runs in stages:

1. A stage is every not-yet-run node onnxruntime can compute from what is known so far (graph
   inputs, initializers, outputs of earlier stages); it becomes one sub-model (``onnx.utils``
   extraction) whose outputs are exactly the values later steps or the caller need.
2. Then every custom node whose inputs are now known runs on the host:
   ``forward(*inputs, **attributes)`` returns one array or a sequence in output order.
3. Repeat until nothing is left. Nodes with no forward, and everything after them, never run.
Each batch keeps only its own intermediate values; nothing persists between batches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qdqkit.core.errors import QdqkitError
from qdqkit.core.numerics import make_session

HostForward = Callable[..., Any]


def forward_for(node: onnx.NodeProto | Any, forwards: Mapping[str, HostForward]) -> HostForward | None:
    """The forward for ``node``, keyed by ``domain::op_type`` or by ``op_type``."""
    return forwards.get(f"{node.domain}::{node.op_type}") or forwards.get(node.op_type)


@dataclass
class _Stage:
    nodes: list[onnx.NodeProto]
    inputs: list[str]
    outputs: list[str]
    session: Any = None  # built at the first batch, when the host outputs' types are known


@dataclass
class _HostStep:
    node: onnx.NodeProto
    forward: HostForward
    attributes: dict[str, Any]


class StagedRunner:
    """Computes ``wanted`` values of ``model`` with host forwards for its custom nodes."""

    def __init__(self, model: onnx.ModelProto, wanted: Sequence[str], skip: set[str],
                 forwards: Mapping[str, HostForward], threads: int = 0) -> None:
        """``skip``: first output names of nodes that must not run (no forward, or after one)."""
        graph = model.graph
        nodes = [n for n in graph.node if not (n.output and n.output[0] in skip)]
        initializers = {i.name: i for i in graph.initializer}
        self.initializers = {name: numpy_helper.to_array(t) for name, t in initializers.items()}
        known = {i.name for i in graph.input if i.name not in initializers}
        self.model, self.threads = model, threads
        self.host_outputs: set[str] = set()
        wanted_set = set(wanted)
        done: set[int] = set()
        self.steps: list[_Stage | _HostStep] = []
        while True:
            available = known | set(initializers) | {""}
            stage: list[int] = []
            for index, node in enumerate(nodes):
                if index in done or forward_for(node, forwards) is not None:
                    continue
                if _is_custom(node):
                    continue
                if all(x in available for x in node.input):
                    stage.append(index)
                    available.update(node.output)
            produced = {out for i in stage for out in nodes[i].output}
            later = {x for j, n in enumerate(nodes) if j not in done and j not in stage
                     for x in n.input if x in produced}
            outputs = sorted((later | wanted_set) & produced)
            if outputs:
                inputs = sorted({x for i in stage for x in nodes[i].input if x in known})
                self.steps.append(_Stage([nodes[i] for i in stage], inputs, outputs))
                known.update(outputs)
            done.update(stage)
            ran = False
            for index, node in enumerate(nodes):
                forward = forward_for(node, forwards)
                if index in done or forward is None:
                    continue
                if all(x in known or x in initializers or x == "" for x in node.input):
                    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
                    self.steps.append(_HostStep(node, forward, attributes))
                    known.update(node.output)
                    self.host_outputs.update(node.output)
                    done.add(index)
                    ran = True
            if not stage and not ran:
                break
        self.wanted = [w for w in wanted if w in known]

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        values: dict[str, np.ndarray] = dict(feeds)
        for step in self.steps:
            if isinstance(step, _Stage):
                if step.session is None:
                    step.session = self._compile(step, values)
                results = step.session.run(step.outputs, {n: values[n] for n in step.inputs})
                values.update(zip(step.outputs, results, strict=True))
                continue
            args = [values[x] if x in values else self.initializers[x]
                    for x in step.node.input if x]
            try:
                result = step.forward(*args, **step.attributes)
            except Exception as exc:
                raise QdqkitError(f"the forward of custom node '{step.node.name}' "
                                  f"({step.node.op_type}) failed: {exc}") from None
            outs = [result] if isinstance(result, np.ndarray) else list(result)
            if len(outs) != len(step.node.output):
                raise QdqkitError(
                    f"the forward of custom node '{step.node.name}' returned {len(outs)} arrays "
                    f"for {len(step.node.output)} outputs")
            values.update(zip(step.node.output, (np.asarray(o) for o in outs), strict=True))
        return {name: values[name] for name in self.wanted}

    def _compile(self, stage: _Stage, values: Mapping[str, np.ndarray]) -> Any:
        """The stage as a session: its nodes, inputs typed from the first batch's values."""
        inputs = [helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(values[name].dtype),
            [None, *values[name].shape[1:]]) for name in stage.inputs]
        used = {x for node in stage.nodes for x in node.input}
        initializers = [t for t in self.model.graph.initializer if t.name in used]
        probe = helper.make_graph(stage.nodes, "stage", inputs, [], initializers)
        model = helper.make_model(probe, opset_imports=self.model.opset_import)
        model.ir_version = self.model.ir_version
        inferred = onnx.shape_inference.infer_shapes(model)
        types = {v.name: v.type.tensor_type.elem_type for v in inferred.graph.value_info}
        outputs = [helper.make_tensor_value_info(name, types.get(name) or onnx.TensorProto.FLOAT,
                                                 None) for name in stage.outputs]
        graph = helper.make_graph(stage.nodes, "stage", inputs, outputs, initializers)
        sub = helper.make_model(graph, opset_imports=self.model.opset_import)
        sub.ir_version = self.model.ir_version
        return make_session(sub.SerializeToString(), threads=self.threads)

    def run_all(self, batches: Iterable[Mapping[str, np.ndarray]]) -> Iterable[dict[str, np.ndarray]]:
        for feeds in batches:
            yield self.run(feeds)


def _is_custom(node: onnx.NodeProto) -> bool:
    return node.domain not in ("", "ai.onnx", "ai.onnx.ml", "com.microsoft")
