"""``verify``: prove numerically that a translation kept the Q/DQ model's meaning.

We emulate what TensorRT's implicit INT8 computes from the translated bundle: the Q/DQ-free model runs
in onnxruntime (optimizations off, see core.numerics) with fake quantization (int8, symmetric, round
to nearest even) re-applied at every tensor the calibration cache gives a scale, and with the weights
of every INT8 layer (Conv, ConvTranspose, Gemm, MatMul whose activation input has a scale) quantized
per output channel at max|w|/127, as TensorRT recomputes them. Its outputs are compared with the
original Q/DQ model's on the same inputs. Tensors without a scale are listed: they run FP16 on the
device (emulated here in the model's own float type, so FP16 rounding is not part of the figure).
A cached scale of exactly 1.0 is the DLA unary marker and is not emulated as quantization.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx_ir as ir

from qdqkit.core import numerics
from qdqkit.core.errors import QdqkitError
from qdqkit.core.macs import infer_shapes
from qdqkit.core.model_io import load_model
from qdqkit.core.progress import Progress
from qdqkit.core.upcast import upcast_float16
from qdqkit.passes.scales import ScaleOrigin, ScaleTable
from qdqkit.translation.fp16 import select_fp16_nodes
from qdqkit.translation.writer import OutputPaths
from qdqkit.trt.calib_cache import read_calib_cache, scale_to_hex

_WEIGHTED = ("Conv", "ConvTranspose", "Gemm", "MatMul")


@dataclass
class OutputComparison:
    name: str
    snr_db: float
    cosine: float
    max_abs: float


@dataclass
class VerifyResult:
    qdq_model: str
    translated_model: str
    calib_cache: str
    inputs: str
    samples: int
    outputs: list[OutputComparison]
    scaled_tensors: int
    quantized_weights: int
    unscaled_tensors: list[str]
    config_matches_cache: bool
    missing_tensors: list[str] = field(default_factory=list)
    unary_tensors: list[str] = field(default_factory=list)

    @property
    def min_snr_db(self) -> float:
        return min((o.snr_db for o in self.outputs), default=float("inf"))


def find_bundle(qdq_model: Path, translated_dir: Path) -> OutputPaths:
    paths = OutputPaths.for_model(translated_dir, qdq_model.stem)
    if not paths.noqdq_model.is_file():
        found = sorted(translated_dir.glob("*_noqdq.onnx")) if translated_dir.is_dir() else []
        if len(found) == 1:
            paths = OutputPaths.for_model(translated_dir, found[0].name[: -len("_noqdq.onnx")])
        else:
            raise QdqkitError(
                f"{translated_dir}: no {paths.noqdq_model.name}; give the folder "
                f"'qdqkit translate -i {qdq_model} -o DIR' wrote"
            )
    if not paths.calib_cache.is_file():
        raise QdqkitError(f"{paths.calib_cache}: missing; translate the model again")
    return paths


def fake_quantize_weight(w: np.ndarray, axis: int) -> np.ndarray:
    """TensorRT's implicit weight quantization: per output channel, scale max|w|/127."""
    moved = np.moveaxis(w.astype(np.float64), axis, 0)
    amax = np.abs(moved.reshape(moved.shape[0], -1)).max(axis=1)
    scale = np.where(amax > 0, amax, 1.0).astype(np.float32).astype(np.float64) / 127.0
    shape = (-1,) + (1,) * (moved.ndim - 1)
    q = np.clip(np.rint(moved / scale.reshape(shape)), -127, 127)
    return np.moveaxis(q * scale.reshape(shape), 0, axis).astype(w.dtype)


def _weight_slot(node: ir.Node) -> tuple[int, int, int] | None:
    """(activation index, weight index, output-channel axis) of a weighted op, if it has a weight."""
    inputs = node.inputs
    if node.op_type in ("Conv", "ConvTranspose"):
        return (0, 1, 1 if node.op_type == "ConvTranspose" else 0) if len(inputs) > 1 else None
    if node.op_type == "Gemm":
        trans_b = node.attributes.get("transB")
        return 0, 1, 0 if trans_b is not None and trans_b.as_int() else 1
    if len(inputs) == 2 and inputs[1] is not None and inputs[1].const_value is not None:
        return 0, 1, inputs[1].const_value.shape.rank() - 1
    if len(inputs) == 2 and inputs[0] is not None and inputs[0].const_value is not None:
        return 1, 0, 0
    return None


def quantize_weights(graph: ir.Graph, scaled: set[str]) -> int:
    done: set[ir.Value] = set()
    for node in graph:
        slot = _weight_slot(node) if node.op_type in _WEIGHTED else None
        if slot is None:
            continue
        act, weight_index, axis = slot
        x, w = node.inputs[act], node.inputs[weight_index]
        if x is None or x.name not in scaled or w is None or w.const_value is None or w in done:
            continue
        array = w.const_value.numpy()
        if array.ndim == 0 or not np.issubdtype(array.dtype, np.floating):
            continue
        w.const_value = ir.Tensor(fake_quantize_weight(array, axis % array.ndim), name=w.name)
        done.add(w)
    return len(done)


def insert_fake_quant(model: ir.Model, scales: dict[str, float]) -> list[str]:
    """Q -> DQ (int8, zero point 0) after every tensor named in ``scales``; returns names not found."""
    graph = model.graph
    by_name: dict[str, ir.Value] = {v.name: v for v in graph.inputs if v.name}
    for node in graph:
        for out in node.outputs:
            if out.name:
                by_name[out.name] = out
    zero = ir.Value(name="qdqkit_verify_zero", const_value=ir.Tensor(np.array(0, np.int8)))
    graph.register_initializer(zero)
    missing = []
    for index, (name, scale) in enumerate(scales.items()):
        value = by_name.get(name)
        if value is None:
            missing.append(name)
            continue
        uses = list(value.uses())
        s = ir.Value(name=f"qdqkit_verify_scale_{index}",
                     const_value=ir.Tensor(np.array(scale, np.float32)))
        graph.register_initializer(s)
        nodes: list[ir.Node] = []
        x = value
        if value.dtype is not None and value.dtype != ir.DataType.FLOAT:
            cast = ir.Node("", "Cast", [x], attributes=[ir.AttrInt64("to", ir.DataType.FLOAT)])
            nodes.append(cast)
            x = cast.outputs[0]
        q = ir.Node("", "QuantizeLinear", [x, s, zero])
        dq = ir.Node("", "DequantizeLinear", [q.outputs[0], s, zero])
        nodes += [q, dq]
        result = dq.outputs[0]
        if value.dtype is not None and value.dtype != ir.DataType.FLOAT:
            back = ir.Node("", "Cast", [result], attributes=[ir.AttrInt64("to", value.dtype)])
            nodes.append(back)
            result = back.outputs[0]
        result.type, result.shape = value.type, value.shape
        for use in uses:
            use.node.replace_input_with(use.idx, result)
        producer = value.producer()
        if producer is not None:
            graph.insert_after(producer, nodes)
        else:
            graph.insert_before(graph.node(0), nodes)
        if value.is_graph_output():
            outputs = graph.outputs
            position = list(outputs).index(value)
            value.name = f"{name}_before_fake_quant"
            result.name = name
            outputs[position] = result
    return missing


def verify(
    qdq_model: str | os.PathLike[str],
    translated_dir: str | os.PathLike[str],
    inputs: str | os.PathLike[str] | None = None,
    *,
    seed: int = 0,
    samples: int = 4,
) -> VerifyResult:
    qdq_path, folder = Path(qdq_model), Path(translated_dir)
    paths = find_bundle(qdq_path, folder)
    cache = read_calib_cache(paths.calib_cache)
    config_matches = _config_matches_cache(paths, cache.scales)
    emulation = load_model(paths.noqdq_model)
    infer_shapes(emulation)
    table = ScaleTable()
    scale_names = set(cache.scales)
    for node in emulation.graph:
        for out in node.outputs:
            if out.name in scale_names:
                table.set(out, cache.scales[out.name], ScaleOrigin.QDQ, "cache")
    for value in emulation.graph.inputs:
        if value.name in scale_names:
            table.set(value, cache.scales[value.name], ScaleOrigin.QDQ, "cache")
    unscaled = select_fp16_nodes(emulation.graph, table).unscaled_tensors
    weights = quantize_weights(emulation.graph, scale_names)
    # Exactly 1.0 is the DLA unary marker (--add_unary_ew_scales_for_dla): the DLA compiler reads
    # it as "no requantization", so it is not emulated as an int8 step of 1.0.
    unary = [name for name, scale in cache.scales.items() if scale == 1.0]
    missing = insert_fake_quant(
        emulation, {n: s for n, s in cache.scales.items() if s != 1.0}
    )

    # Validated like every input (readable, external data inside its folder) before onnxruntime
    # opens it by path; weights are mapped, not read, so the check costs little.
    reference_model = load_model(qdq_path, lazy_weights=True)
    # fp16 models run in fp32 on both sides: onnxruntime's fp16 CPU kernels change between
    # versions, and that is not what this comparison is about (see core.upcast).
    if upcast_float16(reference_model):
        upcast_float16(emulation)
        reference = numerics.make_session(reference_model)
    else:
        reference = numerics.make_session(qdq_path)
    del reference_model
    emulated = numerics.make_session(emulation)
    specs = numerics.input_specs(reference)
    if inputs is not None:
        feeds = numerics.load_feeds(inputs, specs)
        source = str(inputs)
    else:
        feeds = [numerics.random_feeds(specs, seed=seed + i) for i in range(samples)]
        source = f"{samples} random samples (seed {seed}, uniform in [-1, 1])"
    emulated_types = {s.name: s.dtype for s in numerics.input_specs(emulated)}
    names = [o.name for o in reference.get_outputs()]
    available = {o.name for o in emulated.get_outputs()}
    absent = [n for n in names if n not in available]
    if absent:
        raise QdqkitError(
            f"{paths.noqdq_model}: has no output '{absent[0]}' that {qdq_path} has; translate again"
        )
    accumulators = {n: numerics.ErrorAccumulator() for n in names}
    with Progress("verifying", total=len(feeds)) as bar:
        for feed in feeds:
            want = numerics.run(reference, feed, names)
            emulated_feed = {k: v.astype(emulated_types.get(k, v.dtype)) for k, v in feed.items()}
            got = numerics.run(emulated, emulated_feed, names)
            for n in names:
                accumulators[n].add(want[n], got[n])
            bar.advance()
    comparisons = []
    for n in names:
        metrics = accumulators[n].result()
        comparisons.append(OutputComparison(n, metrics.snr_db, metrics.cosine, metrics.max_abs))
    return VerifyResult(
        qdq_model=str(qdq_path),
        translated_model=str(paths.noqdq_model),
        calib_cache=str(paths.calib_cache),
        inputs=source,
        samples=len(feeds),
        outputs=comparisons,
        scaled_tensors=len(cache.scales) - len(missing) - len(unary),
        quantized_weights=weights,
        unscaled_tensors=unscaled,
        config_matches_cache=config_matches,
        missing_tensors=missing,
        unary_tensors=unary,
    )


def _config_matches_cache(paths: OutputPaths, cache_scales: dict[str, float]) -> bool:
    import json

    if not paths.precision_config.is_file():
        return False
    try:
        config = json.loads(paths.precision_config.read_text(encoding="utf-8"))
        scales = config["int8_tensor_scales"]
    except (ValueError, KeyError, TypeError):
        return False
    return list(scales) == list(cache_scales) and all(
        scale_to_hex(float(scales[k])) == scale_to_hex(v) for k, v in cache_scales.items()
    )
