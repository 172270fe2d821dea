"""``qdqkit fix``: repair a Q/DQ model's placement so TensorRT fuses it (see ``api``)."""

from __future__ import annotations

from qdqkit.fixing.api import fix
from qdqkit.fixing.result import EngineFigures, FixAction, FixResult, Unfixed

__all__ = ["EngineFigures", "FixAction", "FixResult", "Unfixed", "fix"]
