"""``inspect``: what a model's quantization looks like, in one read (see ``api``)."""

from __future__ import annotations

from qdqkit.inspection.api import inspect_model
from qdqkit.inspection.result import InspectResult, WeightedOpInfo, ZeroPointProblem

__all__ = ["InspectResult", "WeightedOpInfo", "ZeroPointProblem", "inspect_model"]
