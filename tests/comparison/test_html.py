"""The compare page: its content, and rendering in a real headless browser."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from qdqkit.comparison import compare
from qdqkit.comparison.html import PRECISION_FILL, SNR_BANDS, render_html, write_html
from qdqkit.core.errors import OutputError
from tests.comparison.models import float_and_quant
from tests.engine.test_draw import _chromium, _png_pixels, _run_chromium


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    tmp = tmp_path_factory.mktemp("html")
    fpath, qpath = float_and_quant(tmp, bad="body1_relu_out")
    result = compare(fpath, qpath, progress=False)
    return write_html(result, tmp / "report.html"), result


def _hex(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def test_page_has_summary_table_graph_and_histograms(report: tuple) -> None:
    page, result = report
    text = page.read_text()
    assert text == render_html(result)  # deterministic
    rows = re.findall(r'<tr data-node="([^"]+)"', text)
    assert rows == [n.name for n in result.nodes]
    boxes = re.findall(r'<g class="node q" data-node="([^"]+)"', text)
    assert sorted(boxes) == sorted(n.name for n in result.nodes)
    assert text.count('<figure data-tensor=') == len(result.tensors)
    assert "random data" in text and 'class="card warn"' in text
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    with pytest.raises(OutputError, match=r"\.html"):
        write_html(result, page.with_suffix(".png"))


def test_page_renders_in_headless_chromium(report: tuple, tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (Debian: apt-get install -y chromium); "
                    "the page cannot be checked in a real browser here")
    page, result = report
    dom = _run_chromium(browser, page, tmp_path / "profile-dom", "--dump-dom")
    body = re.search(r"<body[^>]*>", dom.stdout)
    assert body, dom.stderr[-2000:]
    ready = len(result.nodes) + len(result.graph)  # table rows + graph boxes
    assert f'data-ready="{ready}"' in body.group(0), "the script did not finish"
    assert "data-error" not in body.group(0)
    # The script selected the worst node and copied its histogram into the details panel.
    details = dom.stdout.split('<aside id="details">', 1)[1]
    assert f"<h3>{result.layer_ranking[0]}</h3>" in details and "<svg" in details
    shot = tmp_path / "page.png"
    run = _run_chromium(browser, page, tmp_path / "profile-shot", f"--screenshot={shot}")
    assert shot.exists(), run.stderr[-2000:]
    pixels = _png_pixels(shot)
    colours = {tuple(c) for c in pixels.reshape(-1, 3)[::3]}
    assert (pixels.min(axis=2) < 235).mean() > 0.03, "the screenshot is (almost) blank"
    assert _hex(SNR_BANDS[0][1]) in colours  # the bad node's red fill (< 10 dB)
    assert _hex(PRECISION_FILL["INT8"]) in colours  # a predicted INT8 layer tag
