"""Process set-up the commands that do no linear algebra share."""

from __future__ import annotations

import os
import sys


def without_blas_threads() -> None:
    """Ask OpenBLAS for one thread, before numpy loads, unless the user set it.

    OpenBLAS starts one busy-waiting thread per core when numpy loads: about 0.1 s of CPU that
    commands reading and rewriting graphs (translate, lint, inspect) never use. Once numpy is
    loaded the setting no longer matters, so it is left alone then.
    """
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
