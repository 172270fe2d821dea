"""The engine drawing: SVG content, layout sanity, and rendering in a real headless browser."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from qdqkit.cli import main
from qdqkit.core.errors import OutputError
from qdqkit.engine.draw import NODE_H, NODE_W, QDQ_REFORMAT_STROKE, draw_engine, render_svg
from qdqkit.engine.layout import layered_layout
from qdqkit.engine.synthetic import synthetic_engine
from qdqkit.report.names import common_prefix, display_name
from qdqkit.trt.engine_analysis import topology
from qdqkit.trt.engine_json import parse_engine_graph, read_engine_graph
from tests.engine.fixture_files import CONSTRUCTED, graph_path, profile_path, raw_graph

SVG = "{http://www.w3.org/2000/svg}"


def _layer_groups(svg_text: str) -> list[ET.Element]:
    root = ET.fromstring(svg_text)
    return [g for g in root.iter(f"{SVG}g") if "layer" in (g.get("class") or "").split()]


def _border(g: ET.Element) -> ET.Element:
    """The box outline: the first rect that is not the slow-layer halo."""
    return next(r for r in g.findall(f"{SVG}rect") if r.get("class") != "halo")


def test_svg_has_one_box_per_layer_folds_noop_copies_and_marks_qdq_reformats() -> None:
    raw = raw_graph("qat")["Layers"]
    graph = read_engine_graph(graph_path("qat"), profile=profile_path("qat"))
    groups = _layer_groups(render_svg(graph))
    # NoOp copies (timed at 0 ms in the profile) have no box; every other layer has one.
    noops = [r["Name"] for r in raw if r["LayerType"] == "NoOp"]
    assert len(noops) == 2
    assert [g.get("data-name") for g in groups] == [r["Name"] for r in raw if r["Name"] not in noops]
    folded = [name for g in groups for name in (g.get("data-also") or "").split("\n") if name]
    assert sorted(folded) == sorted(noops)
    qdq_boxes = [g.get("data-name") for g in groups if _border(g).get("stroke") == QDQ_REFORMAT_STROKE]
    assert qdq_boxes == [r["Name"] for r in raw if r.get("Origin") == "QDQ"]
    # Every box shows its profiled time.
    times = {r["name"]: r["medianMs"] for r in json.loads(profile_path("qat").read_text())[1:]}
    for g in groups:
        texts = [t.text or "" for t in g.iter(f"{SVG}text")]
        assert f"{times[g.get('data-name')]:.3f} ms" in texts
    # The slowest layers are numbered, slowest first.
    ranked = sorted((int(t.text or 0), g.get("data-name")) for g in groups
                     for t in g.iter(f"{SVG}text") if t.get("class") == "r")
    expected = sorted((n for n in times if n not in noops), key=lambda n: -times[n])
    assert [name for _, name in ranked] == expected[:len(ranked)] and len(ranked) >= 3


def test_deep_engine_wraps_into_columns_of_screen_shape() -> None:
    data, _ = synthetic_engine(860)
    graph = parse_engine_graph(data, "synthetic.json")
    root = ET.fromstring(render_svg(graph))
    width, height = float(root.get("width") or 0), float(root.get("height") or 0)
    assert height < 4000, "a deep engine must not be one tall strip"
    assert 1.0 < width / height < 3.0
    groups = _layer_groups(render_svg(graph))
    folded = sum(len((g.get("data-also") or "").split("\n")) for g in groups if g.get("data-also"))
    noops = sum(1 for r in data["Layers"] if r["LayerType"] == "NoOp")
    assert noops > 0 and folded == noops and len(groups) + folded == 860


def test_box_names_keep_the_part_that_tells_layers_apart() -> None:
    stem = "StatefulPartitionedCall/model/"
    names = [f"{stem}stage{s}_block{b}_conv2/Conv2D + {stem}stage{s}_block{b}_relu/Relu"
             for s in (2, 3) for b in (1, 2, 3)]
    prefix = common_prefix(names)
    assert prefix == stem
    shown = [display_name(n, 34, prefix) for n in names]
    assert len(set(shown)) == len(names) and all(len(t) <= 34 for t in shown)
    assert shown[0] == "…/stage2_block1_conv2/Conv2D +1"
    long = "layer4.1.conv2.weight + QuantizeLinear_240 + Conv_242 + Add_244 + Relu_245"
    assert display_name(long, 34).startswith("layer4.1.conv2.weight")
    assert display_name("Reformatting CopyNode for Input Tensor 0 to Conv_5", 34) == (
        "copy in0 → Conv_5")


def test_drawing_is_deterministic_and_escapes_names(tmp_path: Path) -> None:
    data = {"Layers": [{"Name": "a<b> & \"c\"", "LayerType": "NoOp",
                        "Inputs": [{"Name": "x", "Format/Datatype": "Row major linear FP32"}],
                        "Outputs": [{"Name": "y", "Format/Datatype": "Row major linear FP32"}]}],
            "Bindings": ["x", "y"]}
    graph = parse_engine_graph(data, "odd.json")
    svg = render_svg(graph)
    assert _layer_groups(svg)[0].get("data-name") == "a<b> & \"c\""
    first = draw_engine(graph, tmp_path / "a.html").read_bytes()
    assert draw_engine(graph, tmp_path / "a.html").read_bytes() == first
    with pytest.raises(OutputError, match=r"\.html or \.svg"):
        draw_engine(graph, tmp_path / "a.png")


def test_names_only_exports_draw_as_a_chain(tmp_path: Path) -> None:
    graph = read_engine_graph(CONSTRUCTED / "resnet-qat.names-only.graph.json")
    out = draw_engine(graph, tmp_path / "names.svg")
    assert len(_layer_groups(out.read_text().split("\n", 1)[1])) == len(graph)


def test_layout_of_a_deep_engine_stays_narrow_and_flows_down() -> None:
    data, _ = synthetic_engine(900)
    graph = parse_engine_graph(data, "synthetic.json")
    topo = topology(graph)
    layout = layered_layout(len(graph), topo.preds, NODE_W, NODE_H, 26.0, 24.0)
    assert layout.width < 4 * NODE_W  # residual joins must not walk the chain sideways
    for v, preds in enumerate(topo.preds):
        for u in preds:
            assert layout.y[v] > layout.y[u]
    rows: dict[float, list[float]] = {}
    for x, y in zip(layout.x, layout.y, strict=True):
        rows.setdefault(y, []).append(x)
    for xs in rows.values():
        xs.sort()
        assert all(b - a >= NODE_W for a, b in pairwise(xs))


# Recorded when the drawing gained columns, folded copies and ranked slow layers; a change in
# these digests is a change in what ``engine draw`` writes.
DRAWING_DIGESTS = {
    ("qat.html", True): "59379e16e04dc7a4efec2994749af31212452e1a000f7dfd7f5ccc79ef24b136",
    ("qat.svg", True): "38a0178c1f421a6b9a5abbe5df61ecc58d06c68783075eb0d04d75e39cf91f64",
    ("qat.html", False): "8edd4d39b1f03d19e97823e500bc32dfee5279f72bede0260e656de74b2df689",
}


@pytest.mark.parametrize(("name", "with_profile"), sorted(DRAWING_DIGESTS))
def test_engine_draw_output_is_byte_identical_to_the_recorded_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, with_profile: bool
) -> None:
    profile = ["--profile", str(profile_path("qat"))] if with_profile else []
    out = tmp_path / name
    assert main(["engine", "draw", str(graph_path("qat")), *profile, "-o", str(out)]) == 0
    assert "37 layers" in capsys.readouterr().out
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    assert digest == DRAWING_DIGESTS[(name, with_profile)]


# --- a real browser ----------------------------------------------------------------------------

def _unfilter_row(kind: int, line: bytes, above: bytearray, channels: int) -> bytearray:
    """Undo one PNG row filter (None, Sub, Up, Average, Paeth)."""
    row = bytearray(line)
    if kind == 0:
        return row
    if kind == 2:
        return bytearray((a + b) & 0xFF for a, b in zip(row, above, strict=True))
    for i in range(len(row)):
        left = row[i - channels] if i >= channels else 0
        up = above[i]
        if kind == 1:
            predictor = left
        elif kind == 3:
            predictor = (left + up) >> 1
        else:
            up_left = above[i - channels] if i >= channels else 0
            p = left + up - up_left
            pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
            predictor = left if pa <= pb and pa <= pc else up if pb <= pc else up_left
        row[i] = (row[i] + predictor) & 0xFF
    return row


def _png_pixels(path: Path) -> np.ndarray:
    """Decode an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes) into an array."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6)
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    above = bytearray(stride)
    rows = []
    for y in range(height):
        start = y * (stride + 1)
        above = _unfilter_row(raw[start], raw[start + 1:start + 1 + stride], above, channels)
        rows.append(bytes(above))
    pixels = np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(height, width, channels)
    return pixels[:, :, :3]


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run_chromium(browser: str, page: Path, profile: Path, *extra: str,
                  fragment: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
         "--hide-scrollbars", "--window-size=1100,800", *extra, page.as_uri() + fragment],
        capture_output=True, text=True, timeout=120,
    )


@pytest.mark.parametrize("variant", ["qat", "synthetic-860"])
def test_html_renders_in_headless_chromium_without_script_errors(tmp_path: Path, variant: str) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (Debian: apt-get install -y chromium); "
                    "the drawing cannot be checked in a real browser here")
    if variant == "qat":
        graph = read_engine_graph(graph_path("qat"), profile=profile_path("qat"))
    else:
        data, profile = synthetic_engine(860)
        (tmp_path / "big.graph.json").write_text(json.dumps(data))
        (tmp_path / "big.profile.json").write_text(json.dumps(profile))
        graph = read_engine_graph(tmp_path / "big.graph.json", tmp_path / "big.profile.json")
    page = draw_engine(graph, tmp_path / "engine.html")

    dom = _run_chromium(browser, page, tmp_path / "profile-dom", "--dump-dom")
    body = re.search(r"<body[^>]*>", dom.stdout)
    assert body, dom.stderr[-2000:]
    assert f'data-ready="{len(graph)}"' in body.group(0), "the page script did not finish"
    assert "data-error" not in body.group(0)
    assert "Uncaught" not in dom.stderr, dom.stderr[-2000:]

    shot = tmp_path / "engine.png"
    run = _run_chromium(browser, page, tmp_path / "profile-shot", f"--screenshot={shot}")
    assert shot.exists(), run.stderr[-2000:]
    pixels = _png_pixels(shot)
    assert pixels.shape[0] >= 800 and pixels.shape[1] >= 1100
    non_white = (pixels.min(axis=2) < 235).mean()
    assert non_white > 0.03, "the screenshot is (almost) blank"
    # The precision colours of INT8 (green) and Q/DQ Reformat borders (red) are on screen.
    colours = {tuple(c) for c in pixels.reshape(-1, 3)[::7]}
    assert (0xD3, 0xF9, 0xD8) in colours  # INT8 fill
    assert (0xC9, 0x2A, 0x2A) in colours  # Q/DQ Reformat border


def _near(pixels: np.ndarray, colour: tuple[int, int, int], tolerance: int = 6) -> int:
    return int((np.abs(pixels.astype(int) - np.array(colour)).max(axis=2) <= tolerance).sum())


def test_860_layer_overview_fits_one_screen_with_the_slowest_layers_standing_out(
    tmp_path: Path,
) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (Debian: apt-get install -y chromium)")
    data, profile = synthetic_engine(860)
    (tmp_path / "big.graph.json").write_text(json.dumps(data))
    (tmp_path / "big.profile.json").write_text(json.dumps(profile))
    graph = read_engine_graph(tmp_path / "big.graph.json", tmp_path / "big.profile.json")
    page = draw_engine(graph, tmp_path / "engine.html")
    shot = tmp_path / "fit.png"
    _run_chromium(browser, page, tmp_path / "profile-fit", f"--screenshot={shot}", fragment="#fit")
    pixels = _png_pixels(shot)
    # Boxes in all columns, across the whole width of the drawing pane (not one strip).
    canvas = pixels[100:, :760]
    int8_columns = np.nonzero((np.abs(canvas.astype(int) - (0xD3, 0xF9, 0xD8)).max(axis=2) <= 8)
                              .any(axis=0))[0]
    assert int8_columns.max() - int8_columns.min() > 600  # the pane is 760 px wide
    # The ten slowest layers' halos, grown in the overview: red blobs of at least 20x20 px each.
    halo = 0.8 * np.array((0xFA, 0x52, 0x52)) + 0.2 * 255
    assert _near(pixels, tuple(round(c) for c in halo), 10) > 10 * 400

    # A search from the address finds the layer and marks it.
    name = next(la.name for la in graph.layers if la.name.startswith("stage40.conv1"))
    dom = _run_chromium(browser, page, tmp_path / "profile-find", "--dump-dom",
                        fragment="#find=stage40.conv1")
    hits = re.findall(r'<g class="layer hit"[^>]*data-name="([^"]*)"', dom.stdout)
    assert hits == [name.replace("&", "&amp;")]
    assert "1/1 found" in dom.stdout
