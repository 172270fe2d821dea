"""The one Q/DQ placement policy: where TensorRT wants Q/DQ in a float model (``policy``), and
which points that cannot fuse pay for their Reformats in the predicted engine (``costs``).

``quantize`` places Q/DQ with it and ``fix`` re-places them; the predictor judges the result.
"""

from __future__ import annotations

from qdqkit.trt.placement.costs import Entry, Unpaid, standalone_entries, unpaid_points
from qdqkit.trt.placement.policy import (
    Placement,
    QuantPoint,
    WeightedDecision,
    matches,
    plan_placement,
    precision_sensitive,
    runs_float,
)

__all__ = ["Entry", "Placement", "QuantPoint", "Unpaid", "WeightedDecision", "matches",
           "plan_placement", "precision_sensitive", "runs_float", "standalone_entries",
           "unpaid_points"]
