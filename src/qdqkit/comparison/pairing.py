"""Which tensor of the float model each quantized tensor of the Q/DQ model stands for.

1. Sites: every activation QuantizeLinear's input ``x`` is a quantized tensor (one site per
   tensor, the first Q's parameters); every non-Q/DQ node that reads a DequantizeLinear output
   (an activation or a weight) is a quantized node, measured at its first output.
2. Pairing walks the Q/DQ model once in graph order with Q/DQ looked through (``DQ(Q(x))`` stands
   for ``x``, a DQ of a constant for that weight). A node pairs by name when the float model has
   values of the same names as its outputs, else by structure: the float node of the same op type
   reading the paired inputs (constant inputs are not compared: folding and quantization change
   them). Graph inputs pair by name, else by position when the counts agree.
3. Weights pair through their nodes: the quantized node's weight input and the float node's input
   at the same index, both read as constants.
4. An epilogue folded into its conv (``qdqkit quantize`` folds a BatchNormalization, and a
   constant per-channel ``Mul``/``Add`` after a conv, as TensorRT does): the quantized conv writes
   the last folded node's output name. It pairs with the float conv, its output with that node's
   output (the same values), and its weight with the float weight scaled per output channel as
   the fold scaled it: gamma / sqrt(var + eps) for a BatchNormalization, the Mul's factors.
5. A depthwise input ``qdqkit quantize`` equalized (``Mul(x, f)`` with power-of-two channel
   factors, read only through Q/DQ by depthwise Convs whose weights were divided by ``f``) has no
   float twin: ``replay_equalization`` applies the same exact rescale to the float model first
   (same Mul output name, the float depthwise readers of ``x``), which computes what it did, so
   the Mul, the convs and their weights then pair as any other node. The same for an input
   ``--smooth-quant`` rescaled in front of its quantized MatMuls (one power of two per channel
   of the last axis; the float readers are the MatMuls of the same names), and, by
   ``replay_smoothing``, for the rescales it folded into a LayerNorm or Linear: the model's
   record names source and readers, and the factors are the ratio of the two sources' constants.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx_ir as ir

from qdqkit.core.constants import constant_array
from qdqkit.core.errors import QdqkitError
from qdqkit.core.qdq import (
    DqSource,
    QdqView,
    QuantParams,
    is_dequantize,
    is_qdq,
    node_label,
)
from qdqkit.core.shapes import infer_value_types
from qdqkit.core.weights import is_depthwise_conv
from qdqkit.passes.depthwise_equalize import DepthwiseEqualize, Equalization
from qdqkit.passes.fold_channel_affine import per_channel_constant


@dataclass
class ActivationSite:
    """A quantized activation: the tensor a Q reads, its parameters and the DQ outputs readers see."""

    name: str  # the tensor in the Q/DQ model
    value: ir.Value = field(repr=False)
    params: QuantParams
    quantize: ir.Node = field(repr=False)
    dequantized: list[ir.Value] = field(repr=False, default_factory=list)
    float_name: str | None = None  # the paired tensor in the float model


@dataclass
class WeightSite:
    """A quantized weight of a quantized node: its dequantized values and the float original."""

    node: str
    input_index: int
    dequantized: np.ndarray = field(repr=False)
    original: np.ndarray | None = field(repr=False)  # the float model's weight, when paired
    channel_axis: int | None  # the quantization axis (None: per tensor)


@dataclass
class QuantizedNode:
    """A node reading Q/DQ outputs, measured at its first output."""

    node: ir.Node = field(repr=False)
    name: str
    op_type: str
    output: str
    float_output: str | None
    activation_sites: list[str]  # names of the sites among its inputs
    weights: list[WeightSite]
    float_node: ir.Node | None = field(repr=False, default=None)


@dataclass
class Pairing:
    sites: dict[str, ActivationSite]
    nodes: list[QuantizedNode]
    value_pairs: dict[str, str]  # quant tensor name -> float tensor name
    inputs: dict[str, str]  # quant graph input -> float graph input
    outputs: dict[str, str]  # quant graph output -> float graph output
    unpaired: list[str]  # quantized nodes without a float counterpart


def _looked_through(value: ir.Value | None, view: QdqView) -> ir.Value | None:
    """``DQ(Q(x))`` -> ``x``; a DQ of a constant or any constant -> None (compared as a weight)."""
    while value is not None:
        producer = value.producer()
        if value in view.constant_values:
            return None
        if producer is None or not is_dequantize(producer):
            return value
        source = view.dq_source(producer)
        if source == DqSource.QUANTIZE:
            q = view.quantize_of(producer)
            value = q.inputs[0] if q is not None else None
        elif source == DqSource.CONSTANT:
            return None
        else:
            return value
    return None


def _float_index(graph: ir.Graph) -> tuple[dict[tuple[object, ...], list[ir.Node]], set[ir.Value]]:
    from qdqkit.core.constants import constant_derived_values

    constants = constant_derived_values(graph)
    index: dict[tuple[object, ...], list[ir.Node]] = {}
    for node in graph:
        key = (node.op_type, tuple(
            None if v is None or v in constants else v for v in node.inputs))
        index.setdefault(key, []).append(node)
    return index, constants


def computed_constants_stored(float_model: ir.Model) -> None:
    """Rule 4's precondition: the constants ``qdqkit quantize`` stores before placing (Constant
    nodes, constant Reshape/Transpose chains such as a bias reshaped to (1, C, 1, 1)) are stored
    in the float copy too, so a folded chain's parameters read as constants on both sides. The
    values, and so the float model's function and tensor names, do not change."""
    from qdqkit.passes.constants_to_initializers import ConstantsToInitializers
    from qdqkit.passes.fold_weight_path import FoldWeightReshapeTranspose

    ConstantsToInitializers()(float_model)
    FoldWeightReshapeTranspose()(float_model)


def replay_equalization(quant: ir.Model, float_model: ir.Model) -> int:
    """Rule 5: give ``float_model`` the equalization Muls ``quant`` has; how many were replayed."""
    view = QdqView(quant.graph)
    fvalues: dict[str, ir.Value] = {v.name: v for v in float_model.graph.inputs if v.name}
    for node in float_model.graph:
        fvalues.update((out.name, out) for out in node.outputs if out.name)
    plans = []
    for node in quant.graph:
        if node.op_type != "Mul" or len(node.inputs) != 2 or not node.outputs[0].name:
            continue
        x, factor = node.inputs
        factors = constant_array(factor)
        if x is None or x.name not in fvalues or node.outputs[0].name in fvalues \
                or factors is None:
            continue
        exponents = np.log2(np.asarray(factors, np.float64).ravel())
        if not np.all(np.isfinite(exponents)) or np.any(exponents != np.round(exponents)):
            continue
        readers = _readers_through_qdq(node.outputs[0], view)
        fx = fvalues[x.name or ""]
        if factors.ndim >= 3 and factors.size == factors.shape[1] and readers and all(
                is_depthwise_conv(r) for r in readers):
            freaders = tuple(dict.fromkeys(
                u.node for u in fx.uses() if is_depthwise_conv(u.node) and u.node.inputs[0] is fx
                and constant_array(u.node.inputs[1]) is not None))
        elif factors.ndim == 1 and readers and all(
                r.op_type in ("MatMul", "Gemm") and r.name for r in readers):
            # Explicit SmoothQuant (``quantization.smooth`` rule 4): only the quantized MatMuls
            # read the Mul, so the float readers are those of the same names.
            names = {r.name for r in readers}
            freaders = tuple(dict.fromkeys(
                u.node for u in fx.uses() if u.node.name in names and u.idx == 0
                and constant_array(u.node.inputs[1]) is not None))
            if len(freaders) != len(names):
                continue
        else:
            continue
        if freaders:
            plans.append(Equalization(fx, freaders, factors.ravel().astype(np.float32),
                                      node.outputs[0].name))
    if plans:
        DepthwiseEqualize(plans)(float_model)
    return len(plans)


def replay_smoothing(quant: ir.Model, float_model: ir.Model) -> int:
    """Rule 5 for ``--smooth-quant``'s exact rescales: the ones ``quant``'s record names (each
    source folded its factors into its own constants, each reader's weight rows took them) are
    applied to ``float_model``'s nodes of the same names, the factors read back as the ratio of
    the two sources' first constants; how many were replayed."""
    import json

    from qdqkit.passes.smooth_rescale import Smoothing, SmoothRescale, source_constants

    record = quant.metadata_props.get("qdqkit.quantize")
    entries = json.loads(record).get("calibration", {}).get("smoothed", []) if record else []
    qnodes = {node_label(n): n for n in quant.graph}
    fnodes = {node_label(n): n for n in float_model.graph}
    plans = []
    for entry in entries:
        if entry.get("explicit"):
            continue  # a Mul in the graph: ``replay_equalization`` finds it
        qsource, fsource = qnodes.get(entry["source"]), fnodes.get(entry["source"])
        freaders = tuple(fnodes[r] for r in entry["readers"] if r in fnodes)
        if qsource is None or fsource is None or len(freaders) != len(entry["readers"]):
            continue
        factors = _factors_between(source_constants(fsource), source_constants(qsource))
        if factors is not None:
            plans.append(Smoothing(fsource, freaders, factors))
    if plans:
        SmoothRescale(plans)(float_model)
    return len(plans)


def _factors_between(floats: list[tuple[ir.Node, int]], quants: list[tuple[ir.Node, int]]
                     ) -> np.ndarray | None:
    """Per channel (last axis), how much the float source's constants were divided by in the
    quantized one, read where the float constants are largest (a bias or gamma entry can be 0);
    None when they do not differ that way."""
    if not floats or len(floats) != len(quants):
        return None
    best: np.ndarray | None = None
    factors: np.ndarray | None = None
    for (fnode, findex), (qnode, qindex) in zip(floats, quants, strict=True):
        want, got = constant_array(fnode.inputs[findex]), constant_array(qnode.inputs[qindex])
        if want is None or got is None or want.shape != got.shape or want.ndim == 0:
            return None
        want2 = want.reshape(-1, want.shape[-1]).astype(np.float64)
        got2 = got.reshape(-1, got.shape[-1]).astype(np.float64)
        rows = np.argmax(np.abs(want2), axis=0)  # per channel, its largest entry
        columns = np.arange(want2.shape[1])
        size = np.abs(want2[rows, columns])
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = want2[rows, columns] / got2[rows, columns]
        if best is None or factors is None:
            best, factors = size, ratio
        elif size.shape == best.shape:
            larger = size > best
            best, factors = np.where(larger, size, best), np.where(larger, ratio, factors)
    assert factors is not None
    factors = np.where(np.isfinite(factors) & (factors > 0), factors, 1.0)
    return None if np.allclose(factors, 1.0) else factors.astype(np.float32)


def _readers_through_qdq(value: ir.Value, view: QdqView) -> list[ir.Node]:
    """The nodes reading ``value``, through the Q -> DQ pairs on it."""
    found = []
    for use in value.uses():
        node = use.node
        if is_qdq(node):
            found += [r for out in node.outputs for r in _readers_through_qdq(out, view)]
        else:
            found.append(node)
    return found


def pair_models(quant: ir.Model, float_model: ir.Model, quant_name: str,
                float_name: str) -> Pairing:
    """Pair ``quant``'s quantized tensors and nodes with ``float_model``'s (see the module doc)."""
    qgraph, fgraph = quant.graph, float_model.graph
    view = QdqView(qgraph)
    if view.qdq_count == 0:
        raise QdqkitError(
            f"{quant_name}: has no QuantizeLinear/DequantizeLinear nodes; give the float model "
            "first and the quantized model second"
        )
    inputs = _pair_inputs(qgraph, fgraph, quant_name, float_name)
    fvalues: dict[str, ir.Value] = {v.name: v for v in fgraph.inputs if v.name}
    for node in fgraph:
        fvalues.update((out.name, out) for out in node.outputs if out.name)
    index, fconstants = _float_index(fgraph)
    qtypes, ftypes = infer_value_types(quant), infer_value_types(float_model)

    def same_shapes(qnode: ir.Node, fnode: ir.Node) -> bool:
        # Where both sides know a dimension they must agree: a structural twin of another width
        # is not the tensor this one was quantized from. A dimension one side cannot infer (a
        # weight the float model computes with a Cast, stored in the quantized one) says nothing.
        for qout, fout in zip(qnode.outputs, fnode.outputs, strict=False):
            qshape, fshape = qtypes.shape_of(qout), ftypes.shape_of(fout)
            if qshape is None or fshape is None:
                continue
            qdims, fdims = _static(qshape), _static(fshape)
            if len(qdims) != len(fdims) or any(
                    q is not None and f is not None and q != f
                    for q, f in zip(qdims, fdims, strict=True)):
                return False
        return True
    pairs: dict[ir.Value, ir.Value] = {}
    for qname, fname in inputs.items():
        pairs[_value(qgraph, qname)] = fvalues[fname]
    float_node_of: dict[ir.Node, ir.Node] = {}
    folded: dict[ir.Node, _FoldedEpilogue] = {}  # rule 4
    for node in qgraph:
        if is_qdq(node) or _constant_node(node, view):
            continue
        match = _match_by_name(node, fvalues)
        fold = _folded_by_name(node, fvalues) if match is None else None
        if fold is not None:
            match = fold.conv
            folded[node] = fold
        if match is None:
            key = (node.op_type, tuple(_key_input(v, view, pairs) for v in node.inputs))
            if any(k is _UNPAIRED for k in key[1]):
                continue
            taken = set(float_node_of.values())
            match = next((n for n in index.get(key, ()) if n not in taken), None)
        if match is None or not same_shapes(node, match):
            continue
        float_node_of[node] = match
        twin = folded[node].last if node in folded else match
        for qout, fout in zip(node.outputs, twin.outputs, strict=False):
            pairs[qout] = fout
    sites = _activation_sites(view, pairs)
    nodes, unpaired = _quantized_nodes(qgraph, view, sites, float_node_of, fconstants, folded)
    outputs: dict[str, str] = {}
    for out in qgraph.outputs:
        looked = _looked_through(out, view)
        paired = pairs.get(looked) if looked is not None else None
        if paired is None:
            paired = fvalues.get(out.name or "")
        if paired is not None:
            outputs[out.name or ""] = paired.name or ""
    if not outputs:
        raise QdqkitError(
            f"{quant_name}: none of its outputs ({', '.join(o.name or '?' for o in qgraph.outputs)}) "
            f"pairs with an output or tensor of {float_name}; compare the float model the "
            "quantized one was made from"
        )
    if not any(n.float_output for n in nodes):
        shown = ", ".join(unpaired[:5])
        raise QdqkitError(
            f"{quant_name}: no quantized node pairs with {float_name} (unpaired: "
            f"{shown}); the models must share tensor names or graph structure"
        )
    value_pairs = {str(q.name): str(f.name) for q, f in pairs.items() if q.name and f.name}
    return Pairing(sites, nodes, value_pairs, inputs, outputs, unpaired)


_UNPAIRED = object()


def _constant_node(node: ir.Node, view: QdqView) -> bool:
    """A node computing only constants (a weight's Reshape, a Constant): TensorRT folds it."""
    return bool(node.outputs) and all(o in view.constant_values for o in node.outputs)


def _key_input(value: ir.Value | None, view: QdqView, pairs: dict[ir.Value, ir.Value]) -> object:
    looked = _looked_through(value, view)
    if looked is None:
        return None
    return pairs.get(looked, _UNPAIRED)


def _match_by_name(node: ir.Node, fvalues: dict[str, ir.Value]) -> ir.Node | None:
    outs = [o for o in node.outputs if o.name]
    if not outs:
        return None
    first = fvalues.get(outs[0].name or "")
    producer = first.producer() if first is not None else None
    if producer is None or producer.op_type != node.op_type:
        return None
    return producer


@dataclass(frozen=True)
class _FoldedEpilogue:
    """A float Conv and the BatchNormalization/Mul/Add chain after it that the quantized conv has
    folded in (rule 4)."""

    conv: ir.Node
    last: ir.Node  # the chain's last node: its output is the quantized conv's
    scale: np.ndarray  # per output channel: what the fold multiplied the weight by


_FOLDABLE = ("BatchNormalization", "Mul", "Add")


def _folded_by_name(node: ir.Node, fvalues: dict[str, ir.Value]) -> _FoldedEpilogue | None:
    """Rule 4: ``node`` (a Conv) writes the name of the last node of a float BatchNormalization,
    Mul and Add chain after a float Conv (each tensor before the last read by the next node only,
    every parameter constant)."""
    if node.op_type != "Conv" or not node.outputs or not node.outputs[0].name:
        return None
    value = fvalues.get(node.outputs[0].name)
    last = value.producer() if value is not None else None
    chain: list[ir.Node] = []
    current = value
    while current is not None and (producer := current.producer()) is not None \
            and producer.op_type in _FOLDABLE and len(chain) < 8:
        source = producer.inputs[0] if producer.op_type == "BatchNormalization" else next(
            (v for v in producer.inputs if v is not None and constant_array(v) is None), None)
        if source is None or (chain and len(current.uses()) != 1):
            return None
        chain.append(producer)
        current = source
    conv = current.producer() if current is not None else None
    if not chain or last is None or conv is None or conv.op_type != "Conv" \
            or current is None or len(current.uses()) != 1:
        return None
    weight = constant_array(conv.inputs[1]) if len(conv.inputs) > 1 else None
    if weight is None or weight.ndim < 3:
        return None
    channels = weight.shape[0]
    scale = np.ones(channels)
    inputs = [current, *(n.outputs[0] for n in reversed(chain[1:]))]
    for step, x in zip(reversed(chain), inputs, strict=True):
        factor = _fold_factor(step, x, channels, weight.ndim)
        if factor is None:
            return None
        scale = scale * factor
    return _FoldedEpilogue(conv, last, scale)


def _fold_factor(node: ir.Node, value: ir.Value, channels: int, rank: int) -> np.ndarray | None:
    """What folding ``node`` (reading ``value``) multiplies the conv's weight by, per channel."""
    if node.op_type == "BatchNormalization":
        if len(node.inputs) < 5:
            return None
        gamma, _, _, variance = (constant_array(v) for v in node.inputs[1:5])
        if gamma is None or variance is None:
            return None
        epsilon = node.attributes["epsilon"].as_float() if "epsilon" in node.attributes else 1e-5
        return np.asarray(gamma, np.float64) / np.sqrt(np.asarray(variance, np.float64) + epsilon)
    factor = per_channel_constant(node, value, channels, rank)
    if factor is None:
        return None
    return factor if node.op_type == "Mul" else np.ones(channels)


def _value(graph: ir.Graph, name: str) -> ir.Value:
    return next(v for v in graph.inputs if v.name == name)


def _pair_inputs(qgraph: ir.Graph, fgraph: ir.Graph, quant_name: str,
                 float_name: str) -> dict[str, str]:
    qin = [v.name or "" for v in qgraph.inputs if v.name not in qgraph.initializers]
    fin = [v.name or "" for v in fgraph.inputs if v.name not in fgraph.initializers]
    if set(qin) == set(fin):
        return {n: n for n in qin}
    if len(qin) == len(fin):
        qshapes = [_dims(v) for v in qgraph.inputs if v.name in qin]
        fshapes = [_dims(v) for v in fgraph.inputs if v.name in fin]
        if qshapes == fshapes:
            return dict(zip(qin, fin, strict=True))
    raise QdqkitError(
        f"the models take different inputs: {float_name} takes {', '.join(fin) or 'none'}, "
        f"{quant_name} takes {', '.join(qin) or 'none'}; compare a quantized model with the "
        "float model it was made from"
    )


def _static(shape: ir.Shape) -> tuple[object, ...]:
    return tuple(d if isinstance(d, int) else None for d in shape)


def _dims(value: ir.Value) -> tuple[object, ...] | None:
    return None if value.shape is None else tuple(value.shape)


def _activation_sites(view: QdqView, pairs: dict[ir.Value, ir.Value]) -> dict[str, ActivationSite]:
    sites: dict[str, ActivationSite] = {}
    for q in view.activation_quantizers():
        x = q.inputs[0]
        params = view.params(q)
        if x is None or not x.name or params is None or x.name in sites:
            continue
        looked = _looked_through(x, view)
        paired = pairs.get(looked) if looked is not None else None
        sites[x.name] = ActivationSite(
            name=x.name, value=x, params=params, quantize=q,
            dequantized=[dq.outputs[0] for dq in view.dequantizers_of(q)],
            float_name=paired.name if paired is not None else None,
        )
    return sites


def _quantized_nodes(
    graph: ir.Graph, view: QdqView, sites: dict[str, ActivationSite],
    float_node_of: dict[ir.Node, ir.Node], fconstants: set[ir.Value],
    folded: dict[ir.Node, _FoldedEpilogue],
) -> tuple[list[QuantizedNode], list[str]]:
    site_of_dq: dict[ir.Value, str] = {}
    for site in sites.values():
        for value in site.dequantized:
            site_of_dq[value] = site.name
    nodes: list[QuantizedNode] = []
    unpaired: list[str] = []
    for node in graph:
        if is_qdq(node) or not node.outputs or _constant_node(node, view):
            continue
        activations = [site_of_dq[v] for v in node.inputs if v in site_of_dq]
        fold = folded.get(node)
        weights = [w for w in (_weight_site(node, i, view, float_node_of.get(node), fconstants,
                                            fold.scale if fold is not None else None)
                               for i in range(len(node.inputs))) if w is not None]
        if not activations and not weights:
            continue
        match = float_node_of.get(node)
        if match is None:
            unpaired.append(node_label(node))
        written = fold.last if fold is not None else match
        nodes.append(QuantizedNode(
            node=node, name=node_label(node), op_type=node.op_type,
            output=node.outputs[0].name or "", float_node=match,
            float_output=written.outputs[0].name or None if written is not None else None,
            activation_sites=list(dict.fromkeys(activations)), weights=weights,
        ))
    return nodes, unpaired


def _weight_site(node: ir.Node, index: int, view: QdqView, match: ir.Node | None,
                 fconstants: set[ir.Value], folded_scale: np.ndarray | None = None
                 ) -> WeightSite | None:
    value = node.inputs[index]
    dq = view.dequantize_producer(value)
    if dq is None or view.dq_source(dq) not in (DqSource.CONSTANT, DqSource.QUANTIZE):
        return None
    params = view.params(dq)
    if params is None:
        return None
    q = view.quantize_of(dq)
    if q is not None and not view.is_weight_quantize(q):
        return None  # an activation pair, not a weight
    if q is not None:
        from qdqkit.core.qdq_math import fake_quantize

        float_source = constant_array(q.inputs[0])
        if float_source is None:
            return None
        dequantized = fake_quantize(float_source, params)
    else:
        integers = constant_array(dq.inputs[0])
        if integers is None:
            return None
        from qdqkit.core.qdq_math import dequantize

        dequantized = dequantize(integers, params)
    original = None
    if match is not None and index < len(match.inputs):
        fvalue = match.inputs[index]
        if fvalue is not None and fvalue in fconstants:
            array = constant_array(fvalue)
            if array is not None and array.size == dequantized.size:
                original = np.asarray(array, dtype=np.float32).reshape(dequantized.shape)
                if folded_scale is not None:  # rule 4: a Conv weight or bias, channels first
                    if original.ndim == 0 or folded_scale.size != len(original):
                        return None
                    shape = (-1,) + (1,) * (original.ndim - 1)
                    original = (original * folded_scale.reshape(shape)).astype(np.float32)
    return WeightSite(node=node_label(node), input_index=index, dequantized=dequantized,
                      original=original, channel_axis=params.axis if params.per_channel else None)


@dataclass(frozen=True)
class SketchNode:
    """One compute node of the Q/DQ model for the drawing: Q/DQ and constants looked through."""

    name: str
    op_type: str
    preds: tuple[int, ...]


def graph_sketch(graph: ir.Graph) -> list[SketchNode]:
    """The Q/DQ model's compute nodes in graph order, each with the indices of its producers."""
    view = QdqView(graph)
    index: dict[ir.Node, int] = {}
    sketch: list[SketchNode] = []
    for node in graph:
        if is_qdq(node) or _constant_node(node, view) or node.op_type == "Constant":
            continue
        preds = []
        for value in node.inputs:
            looked = _looked_through(value, view)
            producer = looked.producer() if looked is not None else None
            if producer is not None and producer in index:
                preds.append(index[producer])
        index[node] = len(sketch)
        sketch.append(SketchNode(node_label(node), node.op_type, tuple(dict.fromkeys(preds))))
    return sketch
