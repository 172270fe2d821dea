"""The rule catalog, one unit per rule (ruff's model): ``lint`` and ``engine report`` run them.

Codes by theme: 1xx weighted ops and their epilogues, 2xx residual and elementwise, 3xx Concat and
pooling, 4xx the Q/DQ nodes themselves, 5xx model- and target-level facts (all read by ``lint``),
6xx engine-level facts (read by ``engine report`` from any engine, predicted or real).

To add a rule, write one file ``qdqkit/rules/qdqNNN_short_name.py`` holding ``RULES`` (its
``Rule`` entries), ``check(ctx)`` yielding ``Finding``\\ s and ``fix = None``; keep heavy imports
(onnx-ir, numpy) inside ``check`` so ``qdqkit rules`` stays instant. Then add a triggering model
and its clean twin to ``tests/rules/test_every_rule.py``, which fails for a code without them.
"""

from __future__ import annotations

from qdqkit.rules.registry import all_rules, find_rule, rule, rules_for, units, units_for
from qdqkit.rules.types import Finding, Fix, Rule, RuleUnit, Scope, Severity

__all__ = [
    "Finding", "Fix", "Rule", "RuleUnit", "Scope", "Severity", "all_rules", "find_rule", "rule",
    "rules_for", "units", "units_for",
]
