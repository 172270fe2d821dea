"""Running a float model to see its intermediate tensors, one batch at a time.

1. The requested tensors become the graph's outputs (the model's own outputs are dropped unless
   requested) and nodes that feed none of them are pruned, so each run computes only what is
   observed. The caller's model is never changed.
2. Nodes onnxruntime cannot run (a custom domain, e.g. TensorRT plugins such as
   ``EfficientNMS_TRT``) are removed with everything downstream of them; the requested tensors
   they would produce are reported in ``skipped`` and everything else is still observed. With a
   numpy forward for such an op (``forwards``), the model runs in stages around it instead
   (``core.host_ops``).
3. The session is the numerics runner's with onnxruntime's float optimizations on, as a plain
   inference session has them (fusions, NCHWc layouts; never Q/DQ rewrites or fp16 Cast removal):
   an observed tensor is a graph output, which onnxruntime keeps, so only fusions through the
   tensors nobody asked for happen, and the values are the float model's up to rounding. A
   requested tensor missing from the session's outputs is an error, never a silent gap. Its
   worker threads do not spin between operators, so a caller folding the previous batch into
   statistics meanwhile (``quantization.calibrate``) gets the idle core. Each batch's tensors
   are yielded and then dropped: memory holds one batch.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from qdqkit.core.errors import QdqkitError
from qdqkit.core.host_ops import HostForward, StagedRunner, forward_for
from qdqkit.core.model_io import PROTOBUF_LIMIT_BYTES, model_size_bytes
from qdqkit.core.numerics import make_session, run
from qdqkit.core.observers import TensorObserver
from qdqkit.core.qdq import node_label

# Domains onnxruntime's CPU provider implements (the standard opsets and Microsoft's contrib ops).
ORT_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "com.microsoft", "com.microsoft.nchwc"})


def _subgraph_nodes(node: ir.Node) -> Iterator[ir.Node]:
    for attr in node.attributes.values():
        graphs: Sequence[ir.Graph] = ()
        if attr.type == ir.AttributeType.GRAPH:
            graphs = (attr.as_graph(),)
        elif attr.type == ir.AttributeType.GRAPHS:
            graphs = tuple(attr.as_graphs())
        for graph in graphs:
            for inner in graph:
                yield inner
                yield from _subgraph_nodes(inner)


def _inputs_with_captures(node: ir.Node) -> Iterator[ir.Value]:
    """The node's inputs plus the outer values its subgraphs (If/Loop/Scan bodies) read."""
    yield from (v for v in node.inputs if v is not None)
    for inner in _subgraph_nodes(node):
        yield from (v for v in inner.inputs if v is not None)


class ActivationRunner:
    """Exposes ``tensors`` of a float model and yields them per batch.

    ``observed`` are the tensors each run returns; ``skipped`` the requested tensors that only
    nodes onnxruntime cannot run would produce; ``blocked_nodes`` names those nodes (the custom
    ones and everything downstream of them).
    """

    def __init__(
        self,
        model: onnx.ModelProto | str | os.PathLike[str],
        tensors: Sequence[str],
        *,
        threads: int = 0,
        forwards: Mapping[str, HostForward] | None = None,
    ) -> None:
        proto = _load(model)
        forwards = dict(forwards or {})
        # A copy in onnx-ir form: the edits below never reach the caller's ModelProto.
        graph_model = ir.from_proto(proto)
        graph = graph_model.graph
        local_domains = {f.domain for f in proto.functions}
        blocked: set[ir.Node] = set()
        values: dict[str, ir.Value] = {v.name: v for v in graph.inputs if v.name}
        for node in graph:
            custom = any(
                n.domain not in ORT_DOMAINS and n.domain not in local_domains
                and forward_for(n, forwards) is None
                for n in (node, *_subgraph_nodes(node))
            )
            if custom or any(
                v.producer() in blocked for v in _inputs_with_captures(node)
            ):
                blocked.add(node)
            for value in node.outputs:
                if value.name:
                    values[value.name] = value
        requested = list(dict.fromkeys(tensors))
        unknown = [name for name in requested if name not in values]
        if unknown:
            constants = [name for name in unknown if name in graph.initializers]
            if constants:
                raise QdqkitError(
                    f"tensor '{constants[0]}' is an initializer (a constant), not an activation "
                    "to observe"
                )
            shown = ", ".join(unknown[:5]) + (" ..." if len(unknown) > 5 else "")
            raise QdqkitError(f"the model has no tensor named {shown}; check the names")
        self.skipped = tuple(n for n in requested if values[n].producer() in blocked)
        self.observed = tuple(n for n in requested if values[n].producer() not in blocked)
        self.blocked_nodes = tuple(node_label(n) for n in graph if n in blocked)
        self.input_names = tuple(v.name for v in graph.inputs if v.name not in graph.initializers)
        self.session = None
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        self._staged: StagedRunner | None = None
        hosted = [n for n in graph if n.domain not in ORT_DOMAINS and n not in blocked]
        if self.observed and hosted:
            # Custom nodes with a numpy forward: run in stages around them (core.host_ops).
            skip = {n.outputs[0].name or "" for n in blocked if n.outputs}
            self._staged = StagedRunner(proto, self.observed, skip, forwards, threads)
        elif self.observed:
            keep_only(graph, [values[name] for name in self.observed])
            self.session = self._session(graph_model, threads)

    def _session(self, model: ir.Model, threads: int) -> Any:
        """A session for ``model``; one too large for a protobuf message is saved with its weights
        beside it in a private folder, which onnxruntime then reads by path."""
        if model_size_bytes(model) < PROTOBUF_LIMIT_BYTES:
            session = make_session(model, threads=threads, optimize=True, layout=True,
                                   spin=False)
        else:
            self._folder = tempfile.TemporaryDirectory(prefix="qdqkit-calibration-")
            path = Path(self._folder.name) / "model.onnx"
            ir.save(model, path, external_data="model.onnx.data")
            session = make_session(path, threads=threads, optimize=True, layout=True,
                                   spin=False)
        outputs = {o.name for o in session.get_outputs()}
        lost = [name for name in self.observed if name not in outputs]
        if lost:
            raise QdqkitError(f"onnxruntime's optimizations removed the observed tensor '{lost[0]}'"
                              "; calibration cannot see it (please report the model)")
        return session

    def run(
        self, batches: Iterable[Mapping[str, np.ndarray]]
    ) -> Iterator[dict[str, np.ndarray]]:
        """``{tensor: array}`` of the observed tensors for each batch of feeds."""
        for feeds in batches:
            if self._staged is not None:
                yield self._staged.run(feeds)
            elif self.session is None:
                yield {}
            else:
                yield run(self.session, feeds, self.observed)


def _load(model: onnx.ModelProto | str | os.PathLike[str]) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    path = Path(model)
    try:
        return onnx.load(path)
    except Exception as exc:
        raise QdqkitError(f"{path}: cannot be read as an ONNX model ({exc})") from None


def keep_only(graph: ir.Graph, outputs: list[ir.Value], *, drop_unread_inputs: bool = False
              ) -> None:
    """Make ``outputs`` the graph's outputs and remove nodes that none of them needs.

    With ``drop_unread_inputs``, graph inputs nothing reads any more are dropped too (a session
    then needs, and accepts, no feed for them).
    """
    needed: set[ir.Node] = set()
    stack = [v.producer() for v in outputs]
    while stack:
        node = stack.pop()
        if node is None or node in needed:
            continue
        needed.add(node)
        stack.extend(v.producer() for v in _inputs_with_captures(node))
    graph.outputs.clear()
    graph.outputs.extend(outputs)
    unneeded = [node for node in graph if node not in needed]
    graph.remove(unneeded, safe=False)
    unread = [v for v in graph.inputs if not v.uses() and v not in outputs]
    for value in unread if drop_unread_inputs else ():
        graph.inputs.remove(value)


def observe_activations(
    runner: ActivationRunner,
    batches: Iterable[Mapping[str, np.ndarray]],
    *,
    histogram: bool = True,
    on_batch: Callable[[int], None] | None = None,
) -> dict[str, TensorObserver]:
    """One pass over ``batches``: a :class:`TensorObserver` per observed tensor.

    ``on_batch`` is called with each batch's sample count (for a progress bar).
    """
    observers = {name: TensorObserver(name, histogram=histogram) for name in runner.observed}
    for feeds, tensors in _paired(batches, runner):
        for name, array in tensors.items():
            observers[name].update(array)
        if on_batch is not None:
            first = next(iter(feeds.values()), None)
            on_batch(int(first.shape[0]) if first is not None and first.ndim else 1)
    return observers


def _paired(
    batches: Iterable[Mapping[str, np.ndarray]], runner: ActivationRunner
) -> Iterator[tuple[Mapping[str, np.ndarray], dict[str, np.ndarray]]]:
    for feeds in batches:
        tensors = next(runner.run([feeds]))
        yield feeds, tensors
