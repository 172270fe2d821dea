"""``verify``: prove numerically that a translation kept the Q/DQ model's meaning (see ``api``)."""

from __future__ import annotations

from qdqkit.verification.api import OutputComparison, VerifyResult, verify
from qdqkit.verification.bundle import find_bundle
from qdqkit.verification.emulation import fake_quantize_weight

__all__ = ["OutputComparison", "VerifyResult", "fake_quantize_weight", "find_bundle", "verify"]
