"""``verify``: prove numerically that a translation kept the Q/DQ model's meaning.

We emulate what TensorRT's implicit INT8 computes from the translated bundle (``emulation`` states
the rules: fake quantization at every cached scale, weights of INT8 layers quantized per output
channel at max|w|/127) and run it in onnxruntime (optimizations off, see core.numerics); its outputs
are compared with the original Q/DQ model's on the same inputs. Tensors without a scale are listed:
they run FP16 on the device (emulated here in the model's own float type, so FP16 rounding is not
part of the figure).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from qdqkit.core import numerics
from qdqkit.core.errors import QdqkitError
from qdqkit.core.model_io import load_model
from qdqkit.core.progress import Progress
from qdqkit.core.shapes import fill_value_types
from qdqkit.core.upcast import upcast_float16
from qdqkit.passes.scales import ScaleOrigin, ScaleTable
from qdqkit.translation.fp16 import select_fp16_nodes
from qdqkit.trt.calib_cache import read_calib_cache
from qdqkit.verification.bundle import find_bundle, precision_config_matches_cache
from qdqkit.verification.emulation import insert_fake_quant, quantize_weights


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
    config_matches = precision_config_matches_cache(paths, cache.scales)
    emulation = load_model(paths.noqdq_model)
    fill_value_types(emulation)
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
