"""Reorganizing code must not change what the commands print or write (see ``cases.py``)."""

from __future__ import annotations

import json

import pytest

from tests.golden.cases import DIGESTS, compute


@pytest.mark.slow
def test_outputs_are_byte_identical_to_the_recorded_ones() -> None:
    recorded = json.loads(DIGESTS.read_text())
    now = compute()
    assert sorted(now) == sorted(recorded), "the set of recorded cases changed"
    changed = [name for name in sorted(now) if now[name] != recorded[name]]
    assert not changed, f"{len(changed)} outputs changed: {changed}"
