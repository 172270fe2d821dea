"""Layer by layer: each stretch of the emulation fed the Q/DQ model's own values.

An INT8 network can amplify rounding. Where two correct computations of a layer differ by a float
rounding (a BatchNormalization folded into its conv, an FP16 rounding taken before or after a
fold), a value can land on the other side of a quantizer's rounding point, one step off; the next
layers carry such steps, and each quantizer after them turns more small differences into whole
steps. On a deep network whose INT8 model is far from its float model, the outputs of the
emulation and of the Q/DQ model then differ by more than the translation changed. So when the
outputs disagree, ``verify`` also checks each layer alone:

1. The anchors are the tensors with a cached scale (other than the DLA unary 1.0) that both
   models compute under one name: the quantized activations. The Q/DQ model runs on every batch
   with every anchor exposed.
2. In the emulation every reader of an anchor reads a new input instead, fed the Q/DQ model's
   value, so each stretch of layers between anchors computes from the Q/DQ model's own inputs.
3. At each anchor both values are fake-quantized at its cached scale (what its readers read)
   and compared; graph outputs that are not anchors are compared as they are. A wrong, missing
   or extra scale, or a weight computed differently, shows at the layer that holds it, at the
   size it has there; rounding differences do not grow from one stretch to the next.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx_ir as ir

from qdqkit.core import numerics
from qdqkit.core.model_io import load_model
from qdqkit.core.names import taken_names, unique_name
from qdqkit.core.progress import Progress
from qdqkit.verification.emulation import values_by_name
from qdqkit.verification.running import OutputStore, write_temporary


@dataclass
class LayerCheck:
    """The worst stretch of layers, each computed from the Q/DQ model's own inputs."""

    compared: int  # anchors and graph outputs compared
    exact: int  # of which bit-identical after quantization
    min_snr_db: float
    worst: str  # the tensor where it is lowest ("" when every one is identical)
    samples: int


def check_layers(
    reference: Path, emulation: ir.Model, names: Mapping[str, str], scales: Mapping[str, float],
    data: Any,
) -> LayerCheck:
    """Compare ``emulation`` with the Q/DQ model at ``reference`` stretch by stretch (rules 1-3),
    over every batch of ``data`` (re-iterable, with ``total_samples``, as ``core.data`` gives).

    ``names``: the emulation's name of each anchor candidate -> the Q/DQ model's name of it;
    ``scales``: the cached scale of each emulation name. ``emulation`` is changed.

    As in the rest of ``verify``, one session at a time: the Q/DQ model runs over every batch
    first and its values are kept (``OutputStore``, on disk past its budget), then the emulation.
    """
    graph = emulation.graph
    produced = {out.name: out for node in graph for out in node.outputs if out.name}
    anchors = {name: ref for name, ref in names.items()
               if name in produced and scales.get(name, 1.0) != 1.0}
    outputs = [v.name or "" for v in graph.outputs if v.name not in anchors]
    wanted = list(dict.fromkeys([*anchors.values(), *outputs]))

    expected = OutputStore(wanted)
    try:
        session = _session(_exposing(load_model(reference, lazy_weights=True), wanted))
        inputs = {s.name for s in numerics.input_specs(session)}
        for batch in _counted(data, "layer by layer: the Q/DQ model"):
            expected.add(numerics.run(session, {k: v for k, v in batch.items() if k in inputs},
                                      wanted))
        del session
        numerics.release_freed_memory()

        given: dict[str, str] = {}  # anchor -> the input carrying the Q/DQ model's value
        taken = taken_names(graph)
        for name in anchors:
            value = produced[name]
            carrier = ir.Value(name=unique_name(taken, f"{name}__qdq_model"), type=value.type,
                               shape=value.shape)
            graph.inputs.append(carrier)
            for use in list(value.uses()):
                use.node.replace_input_with(use.idx, carrier)
            if not value.is_graph_output():
                graph.outputs.append(value)
            given[name] = carrier.name or ""
        del graph, produced
        session = _session(emulation)
        types = {s.name: s.dtype for s in numerics.input_specs(session)}
        errors = {name: numerics.ErrorAccumulator() for name in [*anchors, *outputs]}
        samples = 0
        batches = _counted(data, "layer by layer: the emulation")
        for batch, values in zip(batches, expected, strict=True):
            feeds = {**batch, **{given[name]: values[ref] for name, ref in anchors.items()}}
            feeds = {k: np.asarray(v).astype(types[k], copy=False)
                     for k, v in feeds.items() if k in types}
            got = numerics.run(session, feeds, list(errors))
            for name, acc in errors.items():
                want, have = values[anchors.get(name, name)], got[name]
                if name in anchors:
                    want = _fake_quantize(want, scales[name])
                    have = _fake_quantize(have, scales[name])
                acc.add(want, have)
            samples += next(iter(batch.values())).shape[0] if batch else 1
        del session
        numerics.release_freed_memory()
    finally:
        expected.close()
    snr = {name: acc.result().snr_db for name, acc in errors.items()}
    exact = sum(1 for value in snr.values() if value == float("inf"))
    worst = min(snr, key=lambda n: snr[n]) if exact < len(snr) else ""
    return LayerCheck(len(snr), exact, snr.get(worst, float("inf")), worst, samples)


def _counted(data: Any, label: str) -> Iterator[dict[str, np.ndarray]]:
    """``data``'s batches, with a progress bar."""
    with Progress(label, total=data.total_samples) as bar:
        for batch in data:
            yield batch
            bar.advance(next(iter(batch.values())).shape[0] if batch else 1)


def _exposing(model: ir.Model, names: list[str]) -> ir.Model:
    """``model`` with ``names`` among its outputs."""
    graph = model.graph
    by_name = values_by_name(graph)
    for name in names:
        value = by_name[name]
        if not value.is_graph_output():
            graph.outputs.append(value)
    return model


def _session(model: ir.Model) -> Any:
    """A session of ``model`` as verify builds them, reached through a temporary file."""
    with tempfile.TemporaryDirectory(prefix="qdqkit-verify-") as folder:
        path = write_temporary(model, folder)
        del model
        return numerics.make_session(path, optimize=True, spin=False)


def _fake_quantize(values: np.ndarray, scale: float) -> np.ndarray:
    """Symmetric int8 Q -> DQ at ``scale``, round half to even, as the emulation computes it."""
    step = np.float32(scale)
    return np.clip(np.rint(values.astype(np.float32) / step), -128, 127) * step
