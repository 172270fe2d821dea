"""The lint rules: the model-level part of the rule catalog (``qdqkit.rules``), in code order.

Codes by theme: 1xx weighted ops and their epilogues, 2xx residual and elementwise, 3xx Concat and
pooling, 4xx the Q/DQ nodes themselves, 5xx model-level and target-level facts. Each rule is one
unit module of ``qdqkit.rules``; this module only names the ones ``lint`` runs.
"""

from __future__ import annotations

from qdqkit.rules import Rule, Severity, rule, rules_for

RULES: tuple[Rule, ...] = rules_for("model")

__all__ = ["RULES", "Rule", "Severity", "rule"]
