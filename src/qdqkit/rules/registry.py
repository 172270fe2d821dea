"""The rule registry: every unit module of ``qdqkit.rules`` (``qdqNNN*.py``), in code order.

A unit module defines ``RULES`` (its catalog entries), ``check(ctx)`` and ``fix`` (None until the
``fix`` command fills it); ``RUNS_LAST = True`` makes its check run after the others and receive
their findings; ``TARGETS`` names the devices it judges (default both, ``("gpu",)`` for a rule
about explicit fusion). Units are found by listing the package, so adding a rule touches no other
file.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from qdqkit.rules.types import Rule, RuleUnit, Scope


@cache
def units() -> tuple[RuleUnit, ...]:
    """Every rule unit, ordered by its first code."""
    import qdqkit.rules as package

    found = []
    for info in pkgutil.iter_modules(package.__path__):
        if not info.name.startswith("qdq"):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        found.append(RuleUnit(
            module=module.__name__, rules=tuple(module.RULES), check=module.check,
            fix=getattr(module, "fix", None), runs_last=getattr(module, "RUNS_LAST", False),
            targets=tuple(getattr(module, "TARGETS", ("gpu", "dla"))),
        ))
    return tuple(sorted(found, key=lambda unit: unit.codes[0]))


def units_for(scope: Scope) -> tuple[RuleUnit, ...]:
    return tuple(unit for unit in units() if unit.scope == scope)


@cache
def all_rules() -> tuple[Rule, ...]:
    """The whole catalog, in code order."""
    return tuple(sorted((r for unit in units() for r in unit.rules), key=lambda r: r.code))


def rules_for(scope: Scope) -> tuple[Rule, ...]:
    return tuple(r for r in all_rules() if r.scope == scope)


@cache
def _index() -> dict[str, Rule]:
    index = {r.code: r for r in all_rules()}
    index.update({r.name: r for r in all_rules()})
    return index


def find_rule(code_or_name: str) -> Rule | None:
    text = code_or_name.strip()
    index = _index()
    return index.get(text.upper()) or index.get(text.lower())


def rule(code_or_name: str) -> Rule:
    """The rule with this code (``QDQ201``, any case) or name (``residual-skip-float``)."""
    found = find_rule(code_or_name)
    if found is None:
        from qdqkit.core.errors import QdqkitError

        raise QdqkitError(f"no lint rule '{code_or_name}': run 'qdqkit rules' to list them")
    return found
