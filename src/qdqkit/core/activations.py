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
   an observed tensor is read by a graph output, which onnxruntime keeps, so only fusions through
   the tensors nobody asked for happen, and the values are the float model's up to rounding. A
   requested tensor missing from the session's outputs is an error, never a silent gap. Its
   worker threads do not spin between operators, so a caller folding the previous batch into
   statistics meanwhile (``quantization.calibrate``) gets the idle core. Each batch's tensors
   are yielded and then dropped: memory holds one batch.
4. A tensor whose range alone is wanted (``ranges_only``) is reduced inside the session instead
   of coming out whole: ReduceMin and ReduceMax over all axes (of its float32 Cast when it is
   not float32, as ``TensorObserver`` would convert it), Size for its element count, and
   ReduceSum, the NaN test (ReduceMin and ReduceMax skip NaNs). onnxruntime computes them on its
   own threads and only four scalars leave the session (``run_reduced`` yields a
   :class:`TensorRange`); min and max are exact, so the statistics are bit-identical to reducing
   the copied tensor.
5. The NaN test is exact: a finite sum means every value is finite; an infinite min or max is an
   infinity in x; otherwise a non-finite sum is a NaN in x, unless the values are large enough
   for the sum itself to overflow (size x max|x| near float32's limit). Only then is that batch
   run again for those tensors with ReduceSum of ``x - x``, which is 0 exactly unless x holds a
   NaN or an infinity, in a second session made the first time it is needed. The plain sum
   reads each tensor once where ``x - x`` also writes a copy: on a detector observing 500
   tensors that copy cost a fifth of the run.
6. Sessions run their nodes in onnxruntime's priority-based order, which computes each
   reduction soon after its tensor instead of holding every observed tensor until the end of
   the run (a quarter of the run time on that detector).
7. A tensor in ``tolerant`` (also in ``ranges_only``) may hold infinities by design: an additive
   attention mask of 0 and -inf, the log of a zero relative position. When a batch of one is
   not finite, that batch is reduced again, for such tensors only, to the range of its finite
   values (infinities stood in by +inf in the min and -inf in the max), flagged ``non_finite``
   when it held some. A NaN is still reported (``finite`` False) unless the model replaces it
   itself: every reader is ``IsNaN`` of the tensor or a ``Where`` choosing by it (BERT exports
   guard each attention softmax so, for rows masked whole). The session doing it computes only
   what those tensors need (a mask made from the input's shape costs next to nothing).
"""

from __future__ import annotations

import math
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
from qdqkit.core.names import taken_names, unique_name
from qdqkit.core.numerics import make_session, run
from qdqkit.core.observers import TensorObserver, TensorRange
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
    ones and everything downstream of them). Tensors in ``ranges_only`` come out of
    :meth:`run_reduced` as a :class:`TensorRange` (rule 4) when the model runs as one session.
    """

    def __init__(
        self,
        model: onnx.ModelProto | str | os.PathLike[str],
        tensors: Sequence[str],
        *,
        threads: int = 0,
        forwards: Mapping[str, HostForward] | None = None,
        ranges_only: Sequence[str] = (),
        exact_nan_test: bool = False,
        tolerant: Sequence[str] = (),
        finite_only: bool = False,
    ) -> None:
        proto = _load(model)
        # Kept to build the rule 5 re-check session should a batch need it: the caller's path
        # or ModelProto, never a copy.
        self._source = model
        self._threads = threads
        self._exact_nan_test = exact_nan_test
        self._rechecker: ActivationRunner | None = None
        # Rule 7: ranges_only tensors whose infinities (and guarded NaN) are the model's own.
        self._tolerant = frozenset(tolerant)
        self._nan_guarded: frozenset[str] = frozenset()
        self._finite_only = finite_only
        self._finite_checker: ActivationRunner | None = None
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
        self._nan_guarded = frozenset(
            n for n in self.observed if (n in self._tolerant or finite_only)
            and _replaces_its_nan(values[n]))
        self.blocked_nodes = tuple(node_label(n) for n in graph if n in blocked)
        self.input_names = tuple(v.name for v in graph.inputs if v.name not in graph.initializers)
        self.session = None
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        self._staged: StagedRunner | None = None
        # Per reduced tensor: the session outputs holding its min, max, NaN test and size.
        # Per reduced tensor: the session outputs holding its min, max, NaN test and size (and,
        # ranging finite values only, the count of its infinities).
        self._reductions: dict[str, tuple[str, ...]] = {}
        self._fetch: list[str] = []
        hosted = [n for n in graph if n.domain not in ORT_DOMAINS and n not in blocked]
        if self.observed and hosted:
            # Custom nodes with a numpy forward: run in stages around them (core.host_ops).
            skip = {n.outputs[0].name or "" for n in blocked if n.outputs}
            self._staged = StagedRunner(proto, self.observed, skip, forwards, threads)
        elif self.observed:
            reduce = set(ranges_only)
            whole = [values[name] for name in self.observed if name not in reduce]
            reduced = [values[name] for name in self.observed if name in reduce]
            scalars = _add_range_reductions(graph, reduced, exact_nan_test, finite_only)
            self._reductions = {value.name or "": tuple(s.name or "" for s in group)
                                for value, group in zip(reduced, scalars, strict=True)}
            outputs = [*whole, *(v for group in scalars for v in group)]
            self._fetch = [v.name or "" for v in outputs]
            keep_only(graph, outputs)
            self.session = self._session(graph_model, threads)

    def _session(self, model: ir.Model, threads: int) -> Any:
        """A session for ``model``; one too large for a protobuf message is saved with its weights
        beside it in a private folder, which onnxruntime then reads by path."""
        if model_size_bytes(model) < PROTOBUF_LIMIT_BYTES:
            session = make_session(model, threads=threads, optimize=True, layout=True,
                                   spin=False, reductions_early=True)
        else:
            self._folder = tempfile.TemporaryDirectory(prefix="qdqkit-calibration-")
            path = Path(self._folder.name) / "model.onnx"
            ir.save(model, path, external_data="model.onnx.data")
            session = make_session(path, threads=threads, optimize=True, layout=True,
                                   spin=False, reductions_early=True)
        outputs = {o.name for o in session.get_outputs()}
        lost = [name for name in self._fetch if name not in outputs]
        if lost:
            raise QdqkitError(f"onnxruntime's optimizations removed the observed tensor '{lost[0]}'"
                              "; calibration cannot see it (please report the model)")
        return session

    def run(
        self, batches: Iterable[Mapping[str, np.ndarray]]
    ) -> Iterator[dict[str, np.ndarray]]:
        """``{tensor: array}`` of the observed tensors for each batch of feeds (a runner made
        without ``ranges_only``; see :meth:`run_reduced`)."""
        if self._reductions:
            raise ValueError("this runner reduces some tensors inside the session; "
                             "use run_reduced")
        for tensors in self.run_reduced(batches):
            yield {name: v for name, v in tensors.items() if isinstance(v, np.ndarray)}

    def run_reduced(
        self, batches: Iterable[Mapping[str, np.ndarray]]
    ) -> Iterator[dict[str, np.ndarray | TensorRange]]:
        """Per batch of feeds, each observed tensor: whole, or as its :class:`TensorRange` when
        it was asked for in ``ranges_only``."""
        for feeds in batches:
            if self._staged is not None:
                yield dict(self._staged.run(feeds))
            elif self.session is None:
                yield {}
            else:
                fetched = run(self.session, feeds, self._fetch)
                tensors = {name: self._tensor(name, fetched) for name in self.observed}
                flagged = [name for name, value in tensors.items() if name in self._tolerant
                           and (value is None or (isinstance(value, TensorRange)
                                                  and not _all_finite(value)))]
                if flagged:
                    tensors.update(self._finite_ranges(feeds, flagged))
                unsure = [name for name, value in tensors.items() if value is None]
                if unsure:
                    tensors.update(self._recheck(feeds, unsure))
                yield {name: value for name, value in tensors.items() if value is not None}

    def _tensor(
        self, name: str, fetched: Mapping[str, np.ndarray]
    ) -> np.ndarray | TensorRange | None:
        """The tensor or its range; None when only a re-check can tell whether it holds a NaN."""
        scalars = self._reductions.get(name)
        if scalars is None:
            return fetched[name]
        if self._finite_only:  # rule 7: the range of the finite values; a NaN stays an error
            low, high, nans, size, infinities = (float(fetched[s]) for s in scalars)   # unless
            guarded = name in self._nan_guarded  # the model replaces it itself
            return TensorRange(low, high, nans == 0.0 or guarded, int(size),
                               non_finite=infinities > 0 or (guarded and nans > 0))
        low, high, nan_test, size = (float(fetched[s]) for s in scalars)
        if self._exact_nan_test:
            finite: bool | None = nan_test == 0.0
        else:
            finite = _finite_from_sum(low, high, nan_test, int(size))
        if finite is None:
            return None
        return TensorRange(low, high, finite, int(size))

    def _recheck(
        self, feeds: Mapping[str, np.ndarray], names: Sequence[str]
    ) -> dict[str, np.ndarray | TensorRange | None]:
        """Rule 5: ``names`` of this batch reduced again with the exact ``x - x`` NaN test."""
        if self._rechecker is None:
            tensors = [name for name in self.observed if name in self._reductions]
            self._rechecker = ActivationRunner(self._source, tensors, threads=self._threads,
                                               ranges_only=tensors, exact_nan_test=True)
        again = next(self._rechecker.run_reduced([feeds]))
        return {name: again[name] for name in names}


    def _finite_ranges(
        self, feeds: Mapping[str, np.ndarray], names: Sequence[str]
    ) -> dict[str, np.ndarray | TensorRange | None]:
        """Rule 7: ``names`` of this batch reduced to the range of their finite values, by a
        session of their own (made again only when a new tensor needs it)."""
        if self._finite_checker is None or not set(names) <= set(
                self._finite_checker.observed):
            tensors = sorted({*names, *(self._finite_checker.observed
                                        if self._finite_checker is not None else ())})
            self._finite_checker = ActivationRunner(self._source, tensors,
                                                    threads=self._threads, ranges_only=tensors,
                                                    finite_only=True)
        again = next(self._finite_checker.run_reduced([feeds]))
        return {name: again[name] for name in names}


def _replaces_its_nan(value: ir.Value) -> bool:
    """Rule 7: every reader of ``value`` is ``IsNaN(value)`` or a ``Where(IsNaN(value), c,
    value)`` that puts something else in its NaN's place (BERT exports guard each attention
    softmax so: a row masked whole is NaN there)."""
    readers = [use.node for use in value.uses()]
    if not readers or value.is_graph_output():
        return False
    tests = {node.outputs[0] for node in readers if node.op_type == "IsNaN"}
    return bool(tests) and all(
        node.op_type == "IsNaN" or (
            node.op_type == "Where" and len(node.inputs) == 3 and node.inputs[0] in tests
            and node.inputs[2] is value and node.inputs[1] is not value)
        for node in readers)


def _all_finite(batch: TensorRange) -> bool:
    return batch.finite and math.isfinite(batch.minimum) and math.isfinite(batch.maximum)


# Below this |sum| bound no float32 sum of finite values can overflow: rule 5 (half of float32's
# largest value leaves room for the rounding of every partial sum).
_SUM_BOUND = float(np.finfo(np.float32).max) / 2


def _finite_from_sum(low: float, high: float, total: float, size: int) -> bool | None:
    """Rule 5: whether every value was finite, from the min, max and plain sum; None when the
    sum may have overflowed on finite values."""
    if math.isfinite(total):
        return True
    if not (math.isfinite(low) and math.isfinite(high)):
        return False
    if max(abs(low), abs(high)) * max(size, 1) < _SUM_BOUND:
        return False
    return None


def _load(model: onnx.ModelProto | str | os.PathLike[str]) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    path = Path(model)
    try:
        return onnx.load(path)
    except Exception as exc:
        raise QdqkitError(f"{path}: cannot be read as an ONNX model ({exc})") from None


def _add_range_reductions(
    graph: ir.Graph, values: Sequence[ir.Value], exact_nan_test: bool = False,
    finite_only: bool = False,
) -> list[tuple[ir.Value, ...]]:
    """Append, per value, the nodes computing its min, max, NaN test and size (rule 4); the
    scalars they write, in that order. The NaN test sums x, or ``x - x`` when
    ``exact_nan_test`` (rule 5). Reductions over no axes reduce every axis, at any opset (the
    ``axes`` attribute before opset 18, the input from then on, are both left out)."""
    taken = taken_names(graph)

    def add(op_type: str, inputs: list[ir.Value], tag: str, dtype: ir.DataType,
            **attributes: int) -> ir.Value:
        name = unique_name(taken, tag)
        node = ir.Node("", op_type, inputs, name=name,
                       attributes=[ir.AttrInt64(k, v) for k, v in attributes.items()])
        graph.append(node)
        out = node.outputs[0]
        out.name = name
        out.type = ir.TensorType(dtype)
        return out

    scalars: list[tuple[ir.Value, ...]] = []
    f32 = ir.DataType.FLOAT

    def count(flags: ir.Value, tag: str) -> ir.Value:
        """How many of ``flags`` are set, as a float32 scalar."""
        as_float = add("Cast", [flags], f"{tag}_f32", f32, to=int(f32))
        return add("ReduceSum", [as_float], f"{tag}_count", f32, keepdims=0)

    bounds: list[ir.Value] = []
    if finite_only:  # rule 7: what stands in for a NaN or an infinity in the min and in the max
        for tag, bound in (("inf", np.inf), ("minus_inf", -np.inf)):
            name = unique_name(taken, f"qdqkit_{tag}")
            constant = ir.Value(name=name, const_value=ir.Tensor(np.array(bound, np.float32),
                                                                 name=name))
            graph.register_initializer(constant)
            bounds.append(constant)
    for value in values:
        base = value.name or "tensor"
        x = value
        if value.dtype != f32:  # unknown or another type: reduce what the observer would see
            x = add("Cast", [value], f"{base}_qdqkit_fp32", f32, to=int(f32))
        if finite_only:
            nan = add("IsNaN", [x], f"{base}_qdqkit_nan", ir.DataType.BOOL)
            inf = add("IsInf", [x], f"{base}_qdqkit_inf", ir.DataType.BOOL)
            bad = add("Or", [nan, inf], f"{base}_qdqkit_bad", ir.DataType.BOOL)

            scalars.append((
                add("ReduceMin", [add("Where", [bad, bounds[0], x], f"{base}_qdqkit_low", f32)],
                    f"{base}_qdqkit_min", f32, keepdims=0),
                add("ReduceMax", [add("Where", [bad, bounds[1], x], f"{base}_qdqkit_high", f32)],
                    f"{base}_qdqkit_max", f32, keepdims=0),
                count(nan, f"{base}_qdqkit_nans"),
                add("Size", [value], f"{base}_qdqkit_size", ir.DataType.INT64),
                count(inf, f"{base}_qdqkit_infs"),
            ))
            continue
        summed = add("Sub", [x, x], f"{base}_qdqkit_zeros", f32) if exact_nan_test else x
        scalars.append((
            add("ReduceMin", [x], f"{base}_qdqkit_min", f32, keepdims=0),
            add("ReduceMax", [x], f"{base}_qdqkit_max", f32, keepdims=0),
            add("ReduceSum", [summed], f"{base}_qdqkit_nan_test", f32, keepdims=0),
            add("Size", [value], f"{base}_qdqkit_size", ir.DataType.INT64),
        ))
    return scalars


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
