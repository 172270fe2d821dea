"""Write the small labelled data the test suite's accuracy checks use into ``tests/fixtures/``.

``accuracy/digits.npz``: the first 240 of scikit-learn's 8x8 digits (pixels 0..16, labels).
``accuracy/text_lines.npz``: 64 DejaVu-rendered text lines as the PP-OCR angle classifier sees
them (grey 48x192, uint8, the used width; the rest is padding) with the label 1 when the line was
turned by 180 degrees. Both come from ``tasks.py`` with fixed seeds, so re-running this script
writes the same arrays.

    python benchmarks/accuracy/make_test_fixtures.py
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.accuracy.fetch import DEFAULT_CACHE, fetch
from benchmarks.accuracy.tasks import REPO, ppocr_cls

DIGITS = 240
LINES = 64


def main() -> None:
    paths = fetch(("digits", "ppocr_cls"), cache=DEFAULT_CACHE)
    folder = REPO / "tests" / "fixtures" / "accuracy"
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(paths["digits"], "rt") as handle:
        rows = np.loadtxt(handle, delimiter=",", max_rows=DIGITS)
    np.savez_compressed(folder / "digits.npz", pixels=rows[:, :64].reshape(-1, 8, 8).astype(
        np.uint8), labels=rows[:, 64].astype(np.uint8))
    task = ppocr_cls(paths, 0, LINES)
    grey, widths = [], []
    for feeds in task.evaluate:
        x = feeds["x"][0, 0]  # the three channels are equal: the lines are grey
        used = np.flatnonzero(np.any(x != 0.0, axis=0))
        widths.append(int(used[-1]) + 1 if used.size else 0)
        grey.append(np.clip(np.round((x * 0.5 + 0.5) * 255.0), 0, 255).astype(np.uint8))
    np.savez_compressed(folder / "text_lines.npz", lines=np.stack(grey),
                        widths=np.array(widths, np.int32), labels=np.array(task.labels, np.uint8))


if __name__ == "__main__":
    main()
