"""The collector pause, and the process-exit mode the ``qdqkit`` entry point uses."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

from qdqkit.core.gc_pause import paused_cyclic_gc

ROOT = Path(__file__).resolve().parents[2]

# Builds a reference cycle inside a paused block and reports whether a weak reference to it is
# still alive after a full collection, then after entering a second paused block.
CYCLE = """
import gc, sys, weakref
from qdqkit.core import gc_pause
if sys.argv[1] == "exit-mode":
    gc_pause.leave_graphs_to_process_exit()
class Node:
    pass
def cycle():
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)
with gc_pause.paused_cyclic_gc():
    ref = cycle()
print(gc.isenabled(), end=" ")
gc.collect()
print(ref() is not None, end=" ")
with gc_pause.paused_cyclic_gc():
    with gc_pause.paused_cyclic_gc():  # nested: the outer block decides
        pass
    print(ref() is not None, end=" ")
print(gc.get_freeze_count() > 0)
"""


def _cycle(mode: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", CYCLE, mode], capture_output=True, text=True,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_the_pause_restores_the_collector_and_garbage_is_collected() -> None:
    assert _cycle("api") == "True False False False"


def test_exit_mode_leaves_one_graph_frozen_and_frees_it_before_the_next_block() -> None:
    assert _cycle("exit-mode") == "True True False True"


def test_the_pause_keeps_a_disabled_collector_disabled() -> None:
    gc.disable()
    try:
        with paused_cyclic_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
