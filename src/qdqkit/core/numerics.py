"""The one numerics runner: onnxruntime on the CPU with graph optimizations off.

ORT's CPU graph optimizer mis-executes FP16 Q/DQ graphs (it reported 7.7 dB where the true figure
was 28.2 dB on a ModelOpt FP16 output), so every command that compares numbers runs models through
this module, which turns the optimizer off (``verify`` alone asks for the float-only optimizations
on both of the fp32 models it compares, for speed). It also makes seeded random inputs and the
error metrics (SNR, cosine, max abs error) every report uses.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx_ir as ir

from qdqkit.core.errors import QdqkitError

_ORT_TYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}


@dataclass(frozen=True)
class InputSpec:
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype


# Transformers that would undo a deliberate float16 round trip (Cast to fp16 and back), and the
# one that merges back-to-back Q/DQ pairs (Q1 DQ1 Q2 DQ2 -> Q DQ) whatever their scales, which
# ``session.disable_quant_qdq`` does not turn off: once Identity elimination has joined the pairs
# before and after an Identity, it drops one of two roundings that TensorRT does (a requantization
# from one scale to the other). On a transformer recognizer quantized by onnxruntime that moved
# the output by 23 dB.
_KEEP_ROUNDINGS = ["RemoveDuplicateCastTransformer", "CastElimination", "CastFloat16Transformer",
                   "DoubleQDQPairsRemover"]


def make_session(
    model: ir.Model | bytes | str | os.PathLike[str], *, threads: int = 0,
    optimize: bool = False, spin: bool = True, layout: bool = False,
    reductions_early: bool = False,
) -> Any:
    """An onnxruntime CPU session with every graph optimization disabled, or float-only ones.

    ``model`` is an onnx-ir model, a serialized ModelProto or a path. Warnings are silenced: a
    probe or emulation model may keep unused initializers on purpose. ``optimize`` turns on
    onnxruntime's float optimizations up to the extended level (constant folding, which computes
    a weight's Q/DQ once with the kernels a run would use; node fusions) but none of its Q/DQ
    rewrites, which would compute Q/DQ pairs in integer arithmetic instead of as the
    spec defines them, nor the removal of float16 round trips. Use it only for float32 graphs
    (fp16 graphs are upcast first, see ``core.upcast``) and only when both sides of a
    comparison run with it, so they share kernels. ``spin=False`` stops idle worker threads from
    spinning between operators: for a few long runs on a shared machine it saves CPU time and,
    when other work competes for the cores, wall time too. ``layout`` (with ``optimize``) adds
    the layout optimizations (NCHWc convolutions), as a default session has them: for float runs
    whose values are observed, not compared with another session's. ``reductions_early`` runs
    the nodes in onnxruntime's priority-based order, which places each node soon after its
    inputs: a graph whose many observed tensors each feed a small reduction then frees them one
    by one instead of holding them all until the run's end.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    # 4: fatal only. A failing run raises, and qdqkit reports it in one line of its own; the
    # runtime's own error log would print the same failure again, in colour, before it.
    options.log_severity_level = 4
    disabled: list[str] = []
    if optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.add_session_config_entry("session.disable_quant_qdq", "1")
        disabled = _KEEP_ROUNDINGS
        if layout:
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if not spin:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if reductions_early:
        options.execution_order = ort.ExecutionOrder.PRIORITY_BASED
    if threads:
        options.intra_op_num_threads = threads
    source: bytes | str
    shared: list[Any] = []
    if isinstance(model, ir.Model):
        source, shared = _serialize_sharing_weights(model, options)
    elif isinstance(model, bytes):
        source = model
    else:
        source = os.fspath(Path(model))
    try:
        session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"],
                                       disabled_optimizers=disabled)
    except Exception as exc:  # ORT raises its own exception classes
        raise QdqkitError(f"onnxruntime cannot run the model: {ort_message(exc)}") from None
    # onnxruntime reads shared arrays in place and does not own them: they live with the session.
    session.qdqkit_shared_arrays = shared
    return session


# Initializers of at least this size reach onnxruntime as arrays, not serialized bytes.
_SHARED_MIN_BYTES = 4096
_SHAREABLE = frozenset({ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16,
                        ir.DataType.INT8, ir.DataType.UINT8, ir.DataType.INT32, ir.DataType.INT64})


def available_cores() -> int:
    """The cores this process may run on (its affinity, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _serialize_sharing_weights(model: ir.Model, options: Any) -> tuple[bytes, list[Any]]:
    """The model's bytes with its large initializers handed to onnxruntime as arrays.

    Serializing weights copies them into a protobuf that onnxruntime parses and copies again;
    instead each large initializer is written as an external-data placeholder and its array is
    given to the session (``add_external_initializers``), which the caller must keep alive as long
    as the session (``make_session`` hangs the arrays on it). onnxruntime (1.32) still copies
    these arrays while building the session, so the caller's model and the session each hold the
    weights: a caller that no longer needs its model saves it to a file and opens that instead
    (``verify`` does).
    """
    import onnxruntime as ort

    swapped: list[tuple[ir.Value, ir.TensorProtocol]] = []
    names: list[str] = []
    arrays: list[Any] = []
    inputs = set(model.graph.inputs)  # an initializer that is also an input (IR 3) stays inline
    # What the nodes in the graph read (a node taken out of the graph may still list its uses).
    read = {v for node in ir.traversal.RecursiveGraphIterator(model.graph) for v in node.inputs}
    read.update(model.graph.outputs)
    for value in model.graph.initializers.values():
        tensor = value.const_value
        if tensor is None or value in inputs:
            continue
        if value not in read:
            continue  # onnxruntime drops an unused initializer, so it could not take its array
        if tensor.nbytes < _SHARED_MIN_BYTES or tensor.dtype not in _SHAREABLE:
            continue
        array = tensor.numpy()
        if isinstance(tensor, ir.ExternalTensor) or not array.flags.c_contiguous:
            # onnxruntime reads the array in place for the session's lifetime: a mapped file
            # may be unmapped once the model is freed, so it gets a private copy.
            array = np.array(array, order="C", copy=True)
        placeholder = ir.ExternalTensor(
            "qdqkit-in-memory", 0, array.nbytes, tensor.dtype, shape=ir.Shape(array.shape),
            name=value.name or "",
        )
        swapped.append((value, tensor))
        value.const_value = placeholder
        names.append(value.name or "")
        arrays.append(ort.OrtValue.ortvalue_from_numpy(array))
    try:
        data = ir.serde.serialize_model(model).SerializeToString()
    finally:
        for value, tensor in swapped:
            value.const_value = tensor
    if names:
        options.add_external_initializers(names, arrays)
    return data, arrays


def release_freed_memory(collect: bool = False) -> None:
    """Hand memory freed with a dropped session or model back to the operating system (glibc).

    glibc serves large allocations freed once (a model's parsed protobuf, folded weights) from its
    heap afterwards and keeps the freed heap: without this, a session dropped before the next one
    is built still counts in the process's memory, and the next one's peak lands on top of it.
    ``collect`` first runs the cycle collector, which a dropped onnx-ir model (a graph of
    reference cycles, with the weights it maps) needs to be freed at all; it costs tens of ms, so
    it is asked for only then. Without glibc, only the collection happens.
    """
    global _LIBC
    if collect:
        gc.collect()
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        except OSError:
            _LIBC = False
    if _LIBC and hasattr(_LIBC, "malloc_trim"):
        _LIBC.malloc_trim(0)


_LIBC: Any = None


def ort_message(exc: BaseException) -> str:
    """onnxruntime's message on one line, whole sentences, at most ~600 characters.

    Its lines join with "; ": the detail often follows on later lines ("... for the following
    indices" then "index: 0 Got: 3 Expected: 2"), so none is dropped.
    """
    lines = (" ".join(line.split()) for line in str(exc).splitlines())
    text = "; ".join(line for line in lines if line) or type(exc).__name__
    if len(text) <= 600:
        return text
    cut = text.rfind(". ", 0, 600)
    return text[: cut + 1] if cut > 200 else text[:600] + " ..."


def input_specs(session: Any, default_dim: int = 1) -> list[InputSpec]:
    """The session's inputs with symbolic dimensions replaced by ``default_dim``."""
    specs = []
    for arg in session.get_inputs():
        dtype = _ORT_TYPES.get(arg.type)
        if dtype is None:
            raise QdqkitError(f"input '{arg.name}' has type {arg.type}, which qdqkit cannot feed")
        shape = tuple(d if isinstance(d, int) and d > 0 else default_dim for d in arg.shape)
        specs.append(InputSpec(arg.name, shape, np.dtype(dtype)))
    return specs


def random_feeds(specs: Sequence[InputSpec], seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs: floats uniform in [-1, 1], integers and booleans zero."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for spec in specs:
        if np.issubdtype(spec.dtype, np.floating):
            feeds[spec.name] = rng.uniform(-1.0, 1.0, size=spec.shape).astype(spec.dtype)
        else:
            feeds[spec.name] = np.zeros(spec.shape, dtype=spec.dtype)
    return feeds


def load_feeds(
    path: str | os.PathLike[str], specs: Sequence[InputSpec]
) -> list[dict[str, np.ndarray]]:
    """Read inputs from an .npz: one array per input name (optionally a leading sample axis)."""
    file = Path(path)
    if not file.is_file():
        raise QdqkitError(f"{file}: no such inputs file")
    try:
        data = np.load(file, allow_pickle=False)
    except Exception:
        raise QdqkitError(
            f"{file}: not a readable .npz file; save the inputs with numpy.savez(file, name=array)"
        ) from None
    names = {s.name for s in specs}
    missing = names - set(data.files)
    if missing:
        raise QdqkitError(
            f"{file}: has no array for input(s) {', '.join(sorted(missing))}; "
            f"the model's inputs are {', '.join(sorted(names))}"
        )
    arrays = {s.name: np.asarray(data[s.name]) for s in specs}
    samples: list[dict[str, np.ndarray]] = []
    first = specs[0]
    stacked = arrays[first.name].ndim == len(first.shape) + 1
    count = arrays[first.name].shape[0] if stacked else 1
    for i in range(count):
        feed = {}
        for spec in specs:
            arr = arrays[spec.name][i] if stacked else arrays[spec.name]
            feed[spec.name] = arr.astype(spec.dtype, copy=False)
        samples.append(feed)
    return samples


def run(
    session: Any, feeds: Mapping[str, np.ndarray], outputs: Sequence[str] | None = None
) -> dict[str, np.ndarray]:
    names = list(outputs) if outputs is not None else [o.name for o in session.get_outputs()]
    try:
        values = session.run(names, dict(feeds))
    except Exception as exc:
        raise QdqkitError(f"onnxruntime failed while running the model: {ort_message(exc)}") from None
    return dict(zip(names, values, strict=True))


@dataclass(frozen=True)
class ErrorMetrics:
    """How far ``test`` is from ``reference``: SNR in dB, cosine similarity, max abs error."""

    snr_db: float
    cosine: float
    max_abs: float


class ErrorAccumulator:
    """Streaming SNR/cosine/max-abs over many samples, without keeping them."""

    def __init__(self) -> None:
        self.noise = 0.0
        self.dot = 0.0
        self.ref_sq = 0.0
        self.test_sq = 0.0
        self.max_abs = 0.0

    def add(self, reference: np.ndarray, test: np.ndarray) -> None:
        ref = np.asarray(reference, dtype=np.float64).reshape(-1)
        tst = np.asarray(test, dtype=np.float64).reshape(-1)
        if ref.shape != tst.shape:
            raise QdqkitError(f"outputs differ in size ({ref.size} vs {tst.size} elements)")
        diff = ref - tst
        self.noise += float(diff @ diff)
        self.dot += float(ref @ tst)
        self.ref_sq += float(ref @ ref)
        self.test_sq += float(tst @ tst)
        if diff.size:
            self.max_abs = max(self.max_abs, float(np.max(np.abs(diff))))

    def result(self) -> ErrorMetrics:
        if self.noise == 0.0:
            snr = float("inf")
        elif self.ref_sq == 0.0:
            snr = float("-inf")
        else:
            snr = 10.0 * float(np.log10(self.ref_sq / self.noise))
        denom = float(np.sqrt(self.ref_sq) * np.sqrt(self.test_sq))
        # Two all-zero tensors agree perfectly; one all-zero tensor has no direction to compare.
        both_zero = self.ref_sq == self.test_sq == 0.0
        cosine = (1.0 if both_zero else 0.0) if denom == 0.0 else self.dot / denom
        return ErrorMetrics(snr_db=snr, cosine=cosine, max_abs=self.max_abs)


def error_metrics(reference: np.ndarray, test: np.ndarray) -> ErrorMetrics:
    acc = ErrorAccumulator()
    acc.add(reference, test)
    return acc.result()
