"""Where an ONNX model's time goes on onnxruntime's CPU provider, node by node.

1. The model runs with onnxruntime's profiler on (graph optimizations off by default, so each timed
   kernel is one ONNX node; unnamed nodes are named ``<op>_<index>`` first). One warm-up run is
   timed and dropped; the ``runs`` after it are averaged.
2. Per node: mean time, share of the summed node time, MACs (``core.macs``) and bytes read and
   written (input and output tensors, shapes from the run's feeds through ONNX shape inference);
   per op type: the same summed. Sorted slowest first.
3. The trace written with ``-o`` is Chrome trace-event JSON (``{"traceEvents": [...]}``, complete
   ``"X"`` events in microseconds), which Perfetto and chrome://tracing open: one track per
   thread, the measured runs and their node kernels.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from qdqkit.core.atomic import write_text_atomic
from qdqkit.core.data import CalibrationData, DataRequest, DataSource, open_data
from qdqkit.core.errors import QdqkitError
from qdqkit.core.macs import macs_of
from qdqkit.core.numerics import ort_message
from qdqkit.core.shapes import infer_value_types


@dataclass(frozen=True)
class NodeTime:
    name: str
    op_type: str
    mean_ms: float
    share: float  # of the summed node time
    macs: int | None
    bytes: int | None  # inputs read + outputs written


@dataclass(frozen=True)
class OpTypeTime:
    op_type: str
    nodes: int
    mean_ms: float
    share: float
    macs: int | None


@dataclass
class OnnxProfile:
    model: str
    runs: int
    batch: int
    data: str
    optimized: bool
    run_ms_median: float  # one whole session.run, as the profiler timed it
    node_ms_total: float  # summed node kernels per run
    nodes: list[NodeTime]
    op_types: list[OpTypeTime]
    trace: str | None = None
    notes: list[str] = field(default_factory=list)


def _named(proto: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    taken = {n.name for n in copy.graph.node if n.name}
    for index, node in enumerate(copy.graph.node):
        if not node.name:
            name = f"{node.op_type}_{index}"
            while name in taken:
                name += "_"
            node.name = name
            taken.add(name)
    return copy


def profile_model(
    model: str | os.PathLike[str], data: DataSource | DataRequest | None = None, *,
    runs: int = 10,
    batch: int | None = None, seed: int = 0, shapes: Mapping[str, Sequence[int]] | None = None,
    optimized: bool = False, trace: str | os.PathLike[str] | None = None, threads: int = 0,
) -> OnnxProfile:
    """Profile ``model`` on onnxruntime CPU with the first batch of ``data`` (random if None).

    ``shapes`` gives the random inputs (``data`` None) their full shapes where the model leaves
    dimensions symbolic; a ``DataRequest`` carries its own.
    """
    import onnxruntime as ort

    from qdqkit.core.model_io import load_model

    if runs < 1:
        raise QdqkitError(f"--runs must be at least 1, not {runs}")
    path = Path(model)
    loaded = load_model(path)
    proto = _named(ir.serde.serialize_model(loaded))
    if isinstance(data, DataRequest):
        stream = data.open(proto)
    elif data is None:
        stream = _random_batch(proto, batch, shapes, seed)
    else:
        stream = open_data(data, proto, batch=batch, shapes=shapes, seed=seed)
    feeds = next(iter(stream), None)
    if feeds is None:
        raise QdqkitError(f"{stream.description}: gave no samples to run the model on")
    with tempfile.TemporaryDirectory(prefix="qdqkit-profile-") as tmp:
        options = ort.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(tmp) / "ort")
        # 4: fatal only; a failure is reported once, in qdqkit's own line (see core.numerics).
        options.log_severity_level = 4
        options.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimized
                                            else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
        if threads:
            options.intra_op_num_threads = threads
        try:
            session = ort.InferenceSession(proto.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
            for _ in range(runs + 1):
                session.run(None, feeds)
        except Exception as exc:  # onnxruntime raises its own exception classes
            with stream.explaining_guesses():
                raise QdqkitError(f"{path}: onnxruntime cannot run the model: "
                                  f"{ort_message(exc)}") from None
        events = json.loads(Path(session.end_profiling()).read_text(encoding="utf-8"))
    measured = _measured(events)
    result = _summarize(path, proto, feeds, measured, runs, stream.description, optimized)
    result.batch = int(next(iter(feeds.values())).shape[0]) if feeds else 1
    if stream.is_random:
        result.notes.append("no data given: one seeded random batch shaped from the model")
    if trace is not None:
        text = json.dumps({"traceEvents": measured, "displayTimeUnit": "ms",
                           "otherData": {"model": str(path), "runs": runs}}, indent=None)
        result.trace = str(write_text_atomic(Path(trace), text + "\n", protected=(path,)))
    return result


def _random_batch(proto: onnx.ModelProto, batch: int | None,
                  shapes: Mapping[str, Sequence[int]] | None, seed: int) -> CalibrationData:
    """One seeded random batch of the size ``batch``, ``shapes`` or the model give."""
    size = open_data("random", proto, batch=batch, shapes=shapes, seed=seed, limit=1).batch
    # The random source's limit counts samples: one batch needs ``size`` of them.
    return open_data("random", proto, batch=batch, shapes=shapes, seed=seed, limit=size)


def _measured(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events of the timed runs (after the first, warm-up, ``model_run``), as trace events."""
    runs = sorted((e for e in events if e.get("name") == "model_run"), key=lambda e: e["ts"])
    if not runs:
        raise QdqkitError("onnxruntime's profiler recorded no run; cannot profile this model")
    start = runs[0]["ts"] + runs[0]["dur"]
    kept: list[dict[str, Any]] = []
    for event in events:
        if event.get("ph") != "X" or event.get("ts", 0) < start:
            continue
        if event.get("cat") != "Node" and event.get("name") != "model_run":
            continue
        kept.append({k: event[k] for k in ("name", "cat", "ph", "ts", "dur", "pid", "tid", "args")
                     if k in event})
    return sorted(kept, key=lambda e: (e["ts"], e["name"]))


def _summarize(path: Path, proto: onnx.ModelProto, feeds: dict[str, np.ndarray],
               events: list[dict[str, Any]], runs: int, data: str,
               optimized: bool) -> OnnxProfile:
    run_times = [e["dur"] / 1000.0 for e in events if e["name"] == "model_run"]
    per_node: dict[str, float] = {}
    op_of: dict[str, str] = {}
    for event in events:
        if event.get("cat") != "Node" or not event["name"].endswith("_kernel_time"):
            continue
        name = event["name"].removesuffix("_kernel_time")
        per_node[name] = per_node.get(name, 0.0) + event["dur"] / 1000.0
        op_of[name] = str(event.get("args", {}).get("op_name", "?"))
    total = sum(per_node.values()) / runs
    costs = _node_costs(proto, feeds)
    nodes = sorted((NodeTime(name, op_of[name], ms / runs, (ms / runs) / total if total else 0.0,
                             *costs.get(name, (None, None)))
                    for name, ms in per_node.items()), key=lambda n: (-n.mean_ms, n.name))
    by_op: dict[str, list[NodeTime]] = {}
    for node in nodes:
        by_op.setdefault(node.op_type, []).append(node)
    op_types = sorted((OpTypeTime(op, len(group), sum(n.mean_ms for n in group),
                                  sum(n.share for n in group),
                                  sum(n.macs for n in group if n.macs) or None)
                       for op, group in by_op.items()), key=lambda o: (-o.mean_ms, o.op_type))
    return OnnxProfile(str(path), runs, 1, data, optimized,
                       statistics.median(run_times) if run_times else 0.0, total, nodes, op_types)


def _node_costs(proto: onnx.ModelProto, feeds: dict[str, np.ndarray]
                ) -> dict[str, tuple[int | None, int | None]]:
    """MACs and bytes moved per node, with the graph inputs fixed to the fed shapes."""
    from qdqkit.linting.latency import apply_shapes

    model = ir.serde.deserialize_model(proto)  # a copy: the shapes go into it
    # ``apply_shapes`` also drops stored intermediate shapes with symbolic dimensions, which
    # would otherwise win over inference and count those dimensions as 1.
    apply_shapes(model, {name: array.shape for name, array in feeds.items()})
    types = infer_value_types(model)
    costs: dict[str, tuple[int | None, int | None]] = {}
    for node in model.graph:
        try:
            macs = macs_of(node, shape_of=types.shape_of)
        except QdqkitError:
            macs = None
        moved = 0
        for value in (*node.inputs, *node.outputs):
            if value is None:
                continue
            size = _bytes(value, types)
            if size is None:
                moved = -1
                break
            moved += size
        costs[node.name or ""] = (macs, None if moved < 0 else moved)
    return costs


def _bytes(value: ir.Value, types: Any) -> int | None:
    shape = types.shape_of(value)
    dtype = types.dtype_of(value) or value.dtype
    if shape is None or dtype is None:
        return None
    count = 1
    for dim in shape:
        if not isinstance(dim, int):
            return None
        count *= dim
    return int(count * dtype.itemsize)
