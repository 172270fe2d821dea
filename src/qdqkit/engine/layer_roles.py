"""Which engine layers do the network's arithmetic, and what the others are.

``report``, ``draw`` and ``diff`` count "compute layers" (and the INT8 share of them) over the layers
that compute. These do not, in detailed and names-only exports alike:

1. Reformats (Q/DQ ones included) and NoOps: layout and type conversions, views;
2. Constants: kind ``Constant`` (a ``Constant`` LayerType, a ``... [Constant]`` name, or a weight
   reshaped once, see ``trt.engine_json``);
3. markers: a name that is one bracketed word and number, such as ``[trainStation1]``, or the
   ``TrainStation`` LayerType: TensorRT lists them between Myelin subgraphs; no network op is in
   them, and what time they show is waiting, not arithmetic;
4. host copies: a name ending in ``[...HostCopy]``, such as
   ``(Unnamed Layer* 718) [NMS]_1_output[DevicetoShapeHostCopy]``: a shape tensor copied to the
   host so that the next layer's output size is known.
"""

from __future__ import annotations

import re

from qdqkit.trt.engine import EngineLayer, LayerKind

_MARKER_NAME = re.compile(r"^\[[A-Za-z]+\d*\]$")
_HOST_COPY_NAME = re.compile(r"\[\w*HostCopy\]$", re.IGNORECASE)

# The roles that are not compute, in the order reports list them.
NON_COMPUTE_ROLES = ("Reformat", "NoOp", "Constant", "marker", "host copy")


def non_compute_role(layer: EngineLayer) -> str | None:
    """Why ``layer`` computes nothing (one of ``NON_COMPUTE_ROLES``); ``None`` for a compute layer."""
    if layer.is_reformat:
        return "Reformat"
    if layer.kind is LayerKind.NOOP:
        return "NoOp"
    if layer.kind is LayerKind.CONSTANT:
        return "Constant"
    if _MARKER_NAME.match(layer.name) or (layer.type_name or "").lower() == "trainstation":
        return "marker"
    if _HOST_COPY_NAME.search(layer.name):
        return "host copy"
    return None


def is_compute_layer(layer: EngineLayer) -> bool:
    return non_compute_role(layer) is None
