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
   with every anchor quantized at its cached scale and the codes exposed.
2. In the emulation the DQ of each anchor's fake quantization reads a new input instead, fed the
   Q/DQ model's value quantized the same way, so each stretch of layers between anchors computes
   from the Q/DQ model's own inputs.
3. At each anchor the two models' int8 codes are compared (what its readers read; their SNR is
   that of the quantized values); graph outputs that are not anchors are compared as they are.
   A wrong, missing or extra scale, or a weight computed differently, shows at the layer that
   holds it, at the size it has there; rounding differences do not grow from one stretch to the
   next.
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
from qdqkit.core.qdq import FLOAT_TYPES, is_quantize
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
    ``scales``: the cached scale of each emulation name. ``emulation`` (whose anchors carry the
    emulation's fake quantization, ``emulation.insert_fake_quant``) is changed.

    At an anchor only its int8 codes travel, a quarter of the float tensor: the Q/DQ model
    quantizes its value at the cached scale itself, the emulation's DQ reads those codes in place
    of its own Q's, and the two models' codes are compared (their SNR is that of the quantized
    values). As in the rest of ``verify``, one session at a time: the Q/DQ model runs over every
    batch first and its codes are kept (``OutputStore``, on disk past its budget).
    """
    graph = emulation.graph
    quantizer = _fake_quantizers(graph)
    anchors = {name: ref for name, ref in names.items()
               if name in quantizer and scales.get(name, 1.0) != 1.0}
    outputs = [v.name or "" for v in graph.outputs
               if v.name not in anchors and v.dtype in FLOAT_TYPES]
    reference_model = load_model(reference, lazy_weights=True)
    codes = _quantizing(reference_model, {anchors[n]: scales[n] for n in anchors})
    wanted = [*(codes[anchors[n]] for n in anchors), *outputs]

    expected = OutputStore(wanted)
    try:
        session = _session(_exposing(reference_model, outputs))
        del reference_model
        inputs = {s.name for s in numerics.input_specs(session)}
        for batch in _counted(data, "layer by layer: the Q/DQ model"):
            expected.add(numerics.run(session, {k: v for k, v in batch.items() if k in inputs},
                                      wanted))
        del session
        numerics.release_freed_memory()

        given: dict[str, str] = {}  # anchor -> the input carrying the Q/DQ model's codes
        own: dict[str, str] = {}  # anchor -> the emulation's own codes
        taken = taken_names(graph)
        for name in anchors:
            q = quantizer[name]
            codes_out = q.outputs[0]
            source = q.inputs[0]
            codes_out.type = codes_out.type or ir.TensorType(ir.DataType.INT8)
            codes_out.shape = codes_out.shape or (source.shape if source is not None else None)
            carrier = ir.Value(name=unique_name(taken, f"{name}__qdq_model_codes"),
                               type=codes_out.type, shape=codes_out.shape)
            graph.inputs.append(carrier)
            for use in list(codes_out.uses()):
                use.node.replace_input_with(use.idx, carrier)
            codes_out.name = codes_out.name or unique_name(taken, f"{name}__codes")
            graph.outputs.append(codes_out)
            given[name], own[name] = carrier.name or "", codes_out.name or ""
        del graph, quantizer
        session = _session(emulation)
        types = {s.name: s.dtype for s in numerics.input_specs(session)}
        compared = [*(own[n] for n in anchors), *outputs]
        errors = {name: numerics.ErrorAccumulator() for name in [*anchors, *outputs]}
        samples = 0
        batches = _counted(data, "layer by layer: the emulation")
        for batch, values in zip(batches, expected, strict=True):
            feeds = {**batch, **{given[n]: values[codes[anchors[n]]] for n in anchors}}
            feeds = {k: np.asarray(v).astype(types[k], copy=False)
                     for k, v in feeds.items() if k in types}
            got = numerics.run(session, feeds, compared)
            for name in anchors:
                errors[name].add(values[codes[anchors[name]]], got[own[name]])
            for name in outputs:
                errors[name].add(values[name], got[name])
            samples += next(iter(batch.values())).shape[0] if batch else 1
        del session
        numerics.release_freed_memory()
    finally:
        expected.close()
    snr = {name: acc.result().snr_db for name, acc in errors.items()}
    exact = sum(1 for value in snr.values() if value == float("inf"))
    worst = min(snr, key=lambda n: snr[n]) if exact < len(snr) else ""
    return LayerCheck(len(snr), exact, snr.get(worst, float("inf")), worst, samples)


def _fake_quantizers(graph: ir.Graph) -> dict[str, ir.Node]:
    """The emulation's Q on each computed tensor it fake-quantizes, by tensor name."""
    found: dict[str, ir.Node] = {}
    for node in graph:
        for value in node.outputs:
            q = next((u.node for u in value.uses() if is_quantize(u.node) and u.idx == 0), None)
            if value.name and q is not None:
                found[value.name] = q
    return found


def _quantizing(model: ir.Model, scales: Mapping[str, float]) -> dict[str, str]:
    """Add to ``model`` an int8 Q (zero point 0) of each named tensor at its scale, exposed as an
    output; returns the name of each tensor's codes."""
    graph = model.graph
    by_name = values_by_name(graph)
    taken = taken_names(graph)
    zero = ir.Value(name=unique_name(taken, "qdqkit_zero_point"),
                    const_value=ir.Tensor(np.array(0, np.int8)))
    graph.register_initializer(zero)
    codes: dict[str, str] = {}
    for name, scale in scales.items():
        value = by_name[name]
        step = ir.Value(name=unique_name(taken, f"{name}__scale"),
                        const_value=ir.Tensor(np.array(scale, np.float32)))
        graph.register_initializer(step)
        out = ir.Value(name=unique_name(taken, f"{name}__codes"))
        node = ir.Node("", "QuantizeLinear", [value, step, zero], outputs=[out],
                       name=unique_name(taken, f"{name}__quantize"))
        graph.append(node)
        graph.outputs.append(out)
        codes[name] = out.name or ""
    return codes


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
