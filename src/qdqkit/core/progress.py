"""A small progress bar on stderr, shown only when stderr is a terminal."""

from __future__ import annotations

import sys
import time
from types import TracebackType


class Progress:
    """``with Progress("calibrating", total=n) as bar: bar.advance()``.

    Silent when stderr is not a terminal (CI logs, pipes) or when ``enabled`` is False; redraws at
    most ten times a second so it costs nothing in tight loops.
    """

    def __init__(self, label: str, total: int | None = None, enabled: bool | None = None) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._last_draw = 0.0
        self._start = time.monotonic()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.enabled:
            self._draw(force=True)
            sys.stderr.write("\n")
            sys.stderr.flush()

    def advance(self, steps: int = 1) -> None:
        self.done += steps
        if self.enabled:
            self._draw()

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_draw < 0.1:
            return
        self._last_draw = now
        elapsed = now - self._start
        if self.total:
            width = 30
            filled = int(width * min(self.done, self.total) / self.total)
            bar = "#" * filled + "-" * (width - filled)
            text = f"\r{self.label} [{bar}] {self.done}/{self.total} {elapsed:5.1f}s"
        else:
            text = f"\r{self.label} {self.done} {elapsed:5.1f}s"
        sys.stderr.write(text)
        sys.stderr.flush()
