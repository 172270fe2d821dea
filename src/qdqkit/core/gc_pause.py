"""Pausing Python's cyclic garbage collector while a large graph is built and walked."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


class _State:
    # Set once by the command line's process entry: the process ends after the command.
    process_ends_after_command = False
    depth = 0


def leave_graphs_to_process_exit() -> None:
    """Let the process's exit reclaim the graphs of paused blocks instead of the collector.

    Only for a process that ends when its command does (the ``qdqkit`` entry point): when a paused
    block ends, everything it left is moved to the collector's permanent generation
    (``gc.freeze()``), which no collection scans, so the 0.25-0.3 s the collector needs to free a
    20k-node graph object by object is not spent; the operating system takes the memory back at
    exit. A second paused block in the same process (``translate -i A B``) first frees the
    previous one's graph, so at most one graph waits. Never set by the Python API.
    """
    _State.process_ends_after_command = True


@contextlib.contextmanager
def paused_cyclic_gc() -> Iterator[None]:
    """Run the block with the cyclic collector off, restoring its state afterwards.

    A graph IR is tens of thousands of small objects linked both ways; as they pile up the
    collector rescans all of them again and again, which made 20k-node runs super-linear
    (2.8 s instead of 1.7 s). Nothing cyclic becomes garbage until the model is dropped, and
    reference counting still frees everything else at once.
    """
    was_enabled = gc.isenabled()
    outermost = _State.depth == 0
    if outermost and _State.process_ends_after_command and gc.get_freeze_count():
        gc.unfreeze()  # the previous block's graph: free it before building the next one
        gc.collect()
    gc.disable()
    _State.depth += 1
    try:
        yield
    finally:
        _State.depth -= 1
        if outermost and _State.process_ends_after_command:
            gc.freeze()
        if was_enabled:
            gc.enable()
