"""The placement a Q/DQ model should have: the one policy, with the scales the model already carries.

``plan_target(model)`` changes nothing; ``fix`` repairs toward what it returns. Rules:
1. A copy of the model has every Q/DQ stripped (``float_copy``, else ``StripQdqPairs`` on a
   clone); each activation's INT8 scale is read from the Q that quantized it first: an int8 zero
   point of 0 keeps its scale, any other zero point keeps the range it covered,
   ``amax = scale * max(zp - qmin, qmax - zp)``, as a symmetric scale ``amax / 127``. Several Qs
   on one tensor: the widest wins. An activation quantized per channel (NNCF does it to the
   inputs of depthwise convs; TensorRT cannot build it) gets its widest channel's scale, which
   clips no value that its own channel's scale did not.
2. ``trt.placement.plan_placement`` places Q/DQ on the stripped copy, its Constant-node weights
   made initializers first as ``quantize`` makes them. A scale group (Concat, MaxPool
   and SPPF families, Add inputs) takes the widest scale any member carries; a group no member
   carries a scale for takes the widest scale of its neighbours across a scale-preserving op
   (copies, pools, Resize, Concat, Relu, a Cast between float types); else a scale given by the
   caller (``--calib``); else it is listed as missing and its points are left out (a weighted op
   whose input has no scale stays as it is).
3. Everything is keyed by tensor and node names, which rewriting the model does not change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx_ir as ir

from qdqkit.core.errors import QdqkitError
from qdqkit.core.qdq import FLOAT_TYPES, QdqView, QuantParams, node_label, quant_range
from qdqkit.core.shapes import ValueTypes
from qdqkit.passes.constants_to_initializers import ConstantsToInitializers
from qdqkit.passes.float_copy import float_copy
from qdqkit.passes.scales import ScaleTable
from qdqkit.passes.strip_qdq import StripQdqPairs
from qdqkit.trt.placement import Placement, plan_placement
from qdqkit.trt.predict.ops import DATA_MOVEMENT, POOLS
from qdqkit.trt.predict.wanted import is_commuting

# Ops whose output range is (nearly) their input's: a neighbour's scale fits across them.
_SCALE_KEEPING = DATA_MOVEMENT | POOLS | {"Resize", "Upsample", "Concat", "Relu", "Identity"}
_BACKWARD = _SCALE_KEEPING | {"Add"}
_NEAR = 3


@dataclass(frozen=True)
class TargetPoint:
    """One Q/DQ pair the target wants: on ``tensor`` for ``readers`` (None: all) with ``scale``."""

    tensor: str
    readers: tuple[str, ...] | None
    scale: float
    group: str


@dataclass
class QdqTarget:
    points: dict[str, list[TargetPoint]]  # by tensor name
    group_of: dict[str, str]  # tensor name -> scale group
    groups: dict[str, list[str]]  # scale group -> its tensors
    quantized_weighted: set[str]  # weighted ops (node names) whose weight the target quantizes
    float_weighted: dict[str, str]  # weighted ops the policy keeps float -> why
    missing: dict[str, list[str]]  # scale groups without a scale -> their tensors
    scale_source: dict[str, str] = field(default_factory=dict)  # group -> where its scale came from
    unscaled: dict[str, str] = field(default_factory=dict)  # weighted ops left as they are -> why
    float_model: ir.Model | None = None  # the stripped copy (calibrated when scales are missing)


def activation_scale(params: QuantParams) -> float | None:
    """The symmetric int8 scale covering the range one activation Q/DQ represents (rule 1); per
    channel (which TensorRT cannot build on an activation), the widest channel's."""
    if params.blocked:
        return None
    if params.per_channel:
        return _widest_channel_scale(params)
    scale = abs(params.scalar_scale)
    zp = 0 if params.zero_point is None else int(np.asarray(params.zero_point).reshape(-1)[0])
    if params.quant_dtype == ir.DataType.INT8 and zp == 0:
        return scale
    if params.zero_point is None and params.quant_dtype == ir.DataType.UINT8:
        return scale  # TensorRT reads a Q without zero point as int8
    lo, hi = quant_range(params.quant_dtype)
    if lo == hi:
        return None
    return float(np.float32(scale * max(zp - lo, hi - zp) / 127.0))


def _widest_channel_scale(params: QuantParams) -> float | None:
    scales = np.abs(np.asarray(params.scale, dtype=np.float64).reshape(-1))
    zps = (np.zeros(1, np.int64) if params.zero_point is None
           else np.asarray(params.zero_point, dtype=np.int64).reshape(-1))
    if zps.size not in (1, scales.size):
        return None
    if (params.quant_dtype == ir.DataType.INT8 or params.zero_point is None) and not zps.any():
        return float(scales.max())
    lo, hi = quant_range(params.quant_dtype)
    if lo == hi:
        return None
    return float(np.float32((scales * np.maximum(zps - lo, hi - zps)).max() / 127.0))


def carried_scales(model: ir.Model, view: QdqView | None = None) -> dict[str, float]:
    """Each quantized activation's scale by tensor name (rule 1), the widest when several."""
    view = view or QdqView(model.graph)
    scales: dict[str, float] = {}
    for q in view.activation_quantizers():
        x = q.inputs[0]
        params = view.params(q)
        scale = activation_scale(params) if params is not None else None
        if x is None or not x.name or scale is None or scale <= 0:
            continue
        scales[x.name] = max(scale, scales.get(x.name, 0.0))
    for dq in view.dequantize_nodes:
        x = dq.inputs[0]
        if x is not None and x.is_graph_input() and x.name:
            params = view.params(dq)
            scale = activation_scale(params) if params is not None else None
            if scale:
                scales[x.name] = max(scale, scales.get(x.name, 0.0))
    return scales


def _neighbour_scale(value: ir.Value, scales: Mapping[str, float]) -> tuple[float, str] | None:
    """The widest scale within ``_NEAR`` steps of ``value`` across scale-keeping ops (rule 2):
    back through copies, pools, Relu and Add (a residual sum's range is its skip's), forward
    through copies and pools (a pooled tensor's scale, for a pool's input)."""
    found: list[tuple[float, str]] = []
    frontier, seen = [value], {value}
    for _ in range(_NEAR):
        following: list[ir.Value] = []
        for current in frontier:
            producer = current.producer()
            if producer is not None and (producer.op_type in _BACKWARD or is_commuting(producer)
                                         or _float_cast(producer)):
                following.extend(v for v in producer.inputs if v is not None
                                 and v.const_value is None)
            for use in current.uses():
                node = use.node
                if node.op_type in _SCALE_KEEPING or is_commuting(node) or _float_cast(node):
                    following.extend(node.outputs)
        frontier = [v for v in following if v not in seen]
        seen.update(frontier)
        found.extend((scales[v.name], v.name) for v in frontier if v.name and v.name in scales)
        if found:
            break
    return max(found) if found else None


def _float_cast(node: ir.Node) -> bool:
    """A Cast from one float type to another (float32 -> float16 after a network input, or the
    Cast stripping a converting Q/DQ pair leaves): the values, and so the scale, are kept."""
    if node.op_type != "Cast" or "to" not in node.attributes:
        return False
    source = node.inputs[0] if node.inputs else None
    target = ir.DataType(node.attributes["to"].as_int())
    return target in FLOAT_TYPES and source is not None and source.dtype in FLOAT_TYPES


def plan_target(
    model: ir.Model, *, target: str = "gpu", extra_scales: Mapping[str, float] | None = None,
    types: ValueTypes | None = None, view: QdqView | None = None, exclude: Sequence[str] = (),
    earlier_scales: Mapping[str, float] | None = None,
) -> QdqTarget:
    """The placement ``model`` should have (see the module docstring).

    ``types`` are the value types of ``model`` when the caller has them (by name, so they hold
    for the stripped copy too); otherwise they are inferred again. ``view``: ``model``'s Q/DQ
    view when the caller has one. ``earlier_scales``: what the model's tensors carried before
    repairs began (a Q/DQ one round moved away and the next puts back keeps its scale), tried
    after the model's own and its neighbours' and before ``extra_scales`` (calibrated).
    """
    view = view if view is not None and view.graph is model.graph else QdqView(model.graph)
    scales = carried_scales(model, view)
    stripped = float_copy(model, view) or _strip_clone(model)
    # Weights stored in Constant nodes (paddle2onnx's way) count as stored, as quantize reads them.
    ConstantsToInitializers()(stripped)
    placement = plan_placement(stripped, target=target, types=types, exclude=exclude)
    extra = dict(extra_scales or {})
    earlier = dict(earlier_scales or {})
    group_scale: dict[str, float] = {}
    sources: dict[str, str] = {}
    missing: dict[str, list[str]] = {}
    groups = {key: [v.name or "" for v in members] for key, members in placement.groups.items()}
    for key, members in placement.groups.items():
        carried = [(scales[v.name], f"carried by '{v.name}'") for v in members if v.name in scales]
        if not carried:
            near = [n for v in members if (n := _neighbour_scale(v, scales)) is not None]
            carried = [(s, f"from neighbour '{name}'") for s, name in near]
        if not carried:
            carried = [(earlier[v.name], f"carried by '{v.name}' before the repairs")
                       for v in members if v.name in earlier]
        if not carried:
            carried = [(extra[v.name], "calibrated") for v in members if v.name in extra]
        if carried:
            scale, source = max(carried)
            group_scale[key], sources[key] = scale, source
        else:
            missing[key] = groups[key]
    points: dict[str, list[TargetPoint]] = {}
    for point in placement.points:
        name = point.value.name or ""
        if point.group not in group_scale:
            continue
        readers = None if point.readers is None else tuple(node_label(n) for n in point.readers)
        points.setdefault(name, []).append(
            TargetPoint(name, readers, group_scale[point.group], point.group))
    quantized: set[str] = set()
    kept_float: dict[str, str] = {}
    unscaled: dict[str, str] = {}
    entries = _groups_by_reader(placement)
    for decision in placement.weighted:
        label = node_label(decision.node)
        index = view.activation_index(decision.node)
        value = decision.node.inputs[index] if index is not None else None
        entry = entries.get(decision.node)
        if decision.quantized and entry is not None and entry not in group_scale:
            unscaled[label] = (f"no scale for its input '{value.name if value else '?'}': give "
                               "--calib data")
        elif decision.quantized:
            quantized.add(label)
        else:
            kept_float[label] = decision.reason
    group_of = {name: key for key, names in groups.items() for name in names}
    return QdqTarget(points, group_of, groups, quantized, kept_float, missing, sources,
                     unscaled, stripped)



def _strip_clone(model: ir.Model) -> ir.Model:
    """The general way to the float graph (rule 1), for what ``float_copy`` does not take."""
    stripped = model.clone()
    view = QdqView(stripped.graph)
    try:
        StripQdqPairs(ScaleTable(), constants=view.constant_values, view=view)(stripped)
    except AssertionError as exc:
        raise QdqkitError(f"cannot read the Q/DQ placement: {exc}; only constant weights, network "
                          "inputs and Q outputs can be dequantized") from None
    except ValueError:
        raise QdqkitError(_invalid_dequantize(view)) from None
    return stripped


def _groups_by_reader(placement: Placement) -> dict[ir.Node, str]:
    """The scale group of the Q/DQ each node reads (through a zero Pad in front of a conv)."""
    found: dict[ir.Node, str] = {}
    for point in placement.points:
        readers = ([u.node for u in point.value.uses()] if point.readers is None
                   else list(point.readers))
        for reader in readers:
            found.setdefault(reader, point.group)
            if reader.op_type == "Pad":
                for use in reader.outputs[0].uses():
                    found.setdefault(use.node, point.group)
    return found


def _invalid_dequantize(view: QdqView) -> str:
    """Which constant DQ does not follow the ONNX spec (its scale does not fit its axis)."""
    from qdqkit.passes.strip_qdq import dequantized_array

    for dq in view.dequantize_nodes:
        data = dq.inputs[0]
        if data is None or data.const_value is None:
            continue
        try:
            dequantized_array(view, dq, np.dtype(np.float32))
        except ValueError:
            params = view.params(dq)
            size = params.scale.size if params is not None else "?"
            return (f"DequantizeLinear '{node_label(dq)}': its scale ({size} values) or zero point "
                    f"does not fit axis {params.axis if params else '?'} of '{data.name}' "
                    f"{list(data.const_value.shape)}; the model breaks the ONNX spec (onnxruntime "
                    "cannot run it either): re-export it")
    return "a DequantizeLinear breaks the ONNX spec; re-export the model"
