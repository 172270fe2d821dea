"""The comparison as one self-contained HTML page (``report.html_page`` shell).

1. Summary cards: output SNR, cosine, argmax/top-k agreement, samples and data (random data said
   in red), the user's metric when given.
2. A sortable table of the quantized nodes (click a header to sort; click a row for its details).
3. The Q/DQ model's graph (Q/DQ looked through), each box coloured by its graph-wise SNR, with the
   precision of its predicted engine layer in a tag beside it (``engine.layout`` lays it out).
4. One histogram of |x| per quantized activation (the float model's values, log counts) with the
   quantizer's clip range drawn as a red line.
The page's numbers come from the same ``CompareResult`` the JSON prints; the script only sorts,
highlights and fills the details panel.
"""

from __future__ import annotations

import json
import math
from functools import cache
from importlib import resources
from itertools import pairwise
from pathlib import Path

from qdqkit.comparison.result import CompareResult, Histogram, NodeRow, TensorRow
from qdqkit.core.atomic import write_text_atomic
from qdqkit.core.errors import OutputError
from qdqkit.engine.layout import layered_layout
from qdqkit.report.html_page import HtmlPage, escape, render_page
from qdqkit.report.json_output import to_jsonable
from qdqkit.report.text import decibels

BOX_W, BOX_H, TAG_W = 150.0, 40.0, 44.0
NODE_W = BOX_W + TAG_W + 6.0
# Graph-wise SNR bands (dB) and their fills, worst first; unquantized nodes are grey.
SNR_BANDS = ((10.0, "#ffc9c9"), (20.0, "#ffd8a8"), (30.0, "#fff3bf"), (40.0, "#e9fac8"),
             (math.inf, "#d3f9d8"))
UNMEASURED_FILL = "#f1f3f5"
PRECISION_FILL = {"INT8": "#2b8a3e", "FP16": "#1971c2", "FP32": "#862e9c"}


@cache
def _asset(name: str) -> str:
    files = resources.files("qdqkit.comparison").joinpath("static")
    return files.joinpath(name).read_text(encoding="utf-8")


def snr_fill(snr: float | None) -> str:
    if snr is None or math.isnan(snr):
        return UNMEASURED_FILL
    # The last band is open above: it also holds +inf, the SNR of an exact node (e.g. a Shape),
    # which no "below its bound" test can place.
    return next((fill for bound, fill in SNR_BANDS[:-1] if snr < bound), SNR_BANDS[-1][1])


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}%"


def _sort_key(value: float | None) -> str:
    if value is None or math.isnan(value):
        return ""
    return repr(1e9 if value > 1e9 else -1e9 if value < -1e9 else value)


def _cards(result: CompareResult) -> str:
    cards = []
    for out in result.outputs:
        agree = "" if out.argmax_agreement is None else (
            f"<br>argmax {_pct(out.argmax_agreement)} · top-{out.k} {_pct(out.topk_agreement)}")
        cards.append(f'<div class="card"><b>{escape(out.name)}</b><br>SNR {decibels(out.error.snr_db)}'
                     f" dB · cosine {out.error.cosine:.4f}{agree}</div>")
    if result.user_metric is not None:
        cards.append(f'<div class="card"><b>your metric</b><br>{result.user_metric:.6g}</div>')
    data = escape(result.data)
    kind = ' class="card warn"' if result.random_data else ' class="card"'
    cards.append(f"<div{kind}><b>data</b><br>{result.samples} samples: {data}</div>")
    if result.fallback:
        cards.append('<div class="card"><b>fall back first</b><br>'
                     + escape(", ".join(result.fallback[:3])) + "</div>")
    notes = "".join(f"<li>{escape(n)}</li>" for n in result.notes)
    return f'<section id="summary">{"".join(cards)}</section>' + (
        f'<ul class="notes">{notes}</ul>' if notes else "")


_COLUMNS = ("node", "op", "engine", "graph SNR dB", "added SNR dB", "layer SNR dB", "cosine",
            "max err", "weight SNR dB (worst ch.)", "clipped", "saturated", "what-if dB",
            "+Reformats", "INT8 MACs lost")


def _node_cells(row: NodeRow, tensors: dict[str, TensorRow]) -> list[tuple[str, str]]:
    inputs = [tensors[t] for t in row.quantized_inputs if t in tensors]
    clipped = max((t.clipped_fraction for t in inputs if t.clipped_fraction is not None),
                  default=None)
    saturated = max((t.saturated_fraction for t in inputs if t.saturated_fraction is not None),
                    default=None)
    weight = min((w.min_channel_snr_db for w in row.weights if w.min_channel_snr_db is not None),
                 default=None)
    what = row.what_if
    graph = row.graph.snr_db if row.graph else None
    local = row.local.snr_db if row.local else None
    return [
        (row.name, escape(row.name)), (row.op_type, escape(row.op_type)),
        (row.engine_precision or "", escape(row.engine_precision or "-")),
        (_sort_key(graph), decibels(graph)), (_sort_key(row.added_snr_db), decibels(row.added_snr_db)),
        (_sort_key(local), decibels(local)),
        (_sort_key(row.graph.cosine if row.graph else None),
         f"{row.graph.cosine:.4f}" if row.graph else "-"),
        (_sort_key(row.graph.max_abs if row.graph else None),
         f"{row.graph.max_abs:.3g}" if row.graph else "-"),
        (_sort_key(weight), decibels(weight)), (_sort_key(clipped), _pct(clipped)),
        (_sort_key(saturated), _pct(saturated)),
        (_sort_key(what.snr_gain_db if what else None), decibels(what.snr_gain_db) if what else "-"),
        (_sort_key(what.reformats_added if what and what.reformats_added is not None else None),
         "-" if what is None or what.reformats_added is None else f"{what.reformats_added:+d}"),
        (_sort_key(what.int8_macs_lost if what and what.int8_macs_lost is not None else None),
         "-" if what is None or what.int8_macs_lost is None else f"{what.int8_macs_lost:,}"),
    ]


def _table(result: CompareResult) -> str:
    tensors = {t.name: t for t in result.tensors}
    head = "".join(f'<th data-col="{i}">{escape(c)}</th>' for i, c in enumerate(_COLUMNS))
    rows = []
    for row in result.nodes:
        cells = "".join(f'<td data-v="{escape(key)}">{text}</td>'
                        for key, text in _node_cells(row, tensors))
        fill = snr_fill(row.graph.snr_db if row.graph else None)
        rows.append(f'<tr data-node="{escape(row.name)}" style="--fill:{fill}">{cells}</tr>')
    return (f'<section><h2>quantized nodes</h2><table id="nodes"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></section>')


def _graph_svg(result: CompareResult) -> str:
    sketch = result.graph
    if not sketch:
        return ""
    layout = layered_layout(len(sketch), [list(s.preds) for s in sketch], NODE_W, BOX_H,
                            30.0, 20.0)
    rows = {n.name: n for n in result.nodes}
    parts = []
    arcs = set(layout.arcs)
    shift = -TAG_W / 2  # boxes sit left of their precision tag
    for v, node in enumerate(sketch):
        for u in node.preds:
            start = (layout.x[u] + shift, layout.y[u] + BOX_H)
            end = (layout.x[v] + shift, layout.y[v])
            if (u, v) in arcs:  # a very long skip: round the side instead of through the ranks
                side = layout.width - 20.0
                d = (f"M{start[0]:.1f},{start[1]:.1f}C{side:.1f},{start[1]:.1f} {side:.1f},"
                     f"{end[1]:.1f} {end[0]:.1f},{end[1]:.1f}")
            else:
                points = [start, *((x + shift, y) for x, y in layout.routes.get((u, v), [])), end]
                d = f"M{start[0]:.1f},{start[1]:.1f}" + "".join(
                    f"C{x0:.1f},{(y0 + y1) / 2:.1f} {x1:.1f},{(y0 + y1) / 2:.1f} {x1:.1f},{y1:.1f}"
                    for (x0, y0), (x1, y1) in pairwise(points))
            parts.append(f'<path class="e" d="{d}"/>')
    for v, node in enumerate(sketch):
        row = rows.get(node.name)
        graph = row.graph.snr_db if row is not None and row.graph else None
        x = layout.x[v] - NODE_W / 2
        y = layout.y[v]
        label = node.name if len(node.name) <= 22 else node.name[:19] + "..."
        measure = f"{decibels(graph)} dB" if row is not None else node.op_type
        tip = f"{node.name} ({node.op_type})" + (f": graph-wise SNR {decibels(graph)} dB"
                                                  if row is not None else "")
        tag = ""
        if row is not None and row.engine_precision:
            colour = PRECISION_FILL.get(row.engine_precision, "#868e96")
            tag = (f'<rect x="{x + BOX_W + 6:.1f}" y="{y + 10:.1f}" width="{TAG_W:.0f}" '
                   f'height="20" rx="3" fill="{colour}"/>'
                   f'<text class="tag" x="{x + BOX_W + 6 + TAG_W / 2:.1f}" '
                   f'y="{y + 24:.1f}">{escape(row.engine_precision)}</text>')
        parts.append(
            f'<g class="node{" q" if row is not None else ""}" data-node="{escape(node.name)}">'
            f"<title>{escape(tip)}</title>"
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{BOX_W:.0f}" height="{BOX_H:.0f}" rx="4" '
            f'fill="{snr_fill(graph) if row is not None else UNMEASURED_FILL}" stroke="#495057"/>'
            f'<text class="n" x="{x + 6:.1f}" y="{y + 16:.1f}">{escape(label)}</text>'
            f'<text class="m" x="{x + 6:.1f}" y="{y + 32:.1f}">{escape(measure)}</text>{tag}</g>')
    width, height = max(layout.width, 400.0), layout.height
    return (f'<section><h2>graph, coloured by graph-wise SNR · tag: predicted engine layer '
            f'precision (TensorRT {escape(result.trt)})</h2><div id="graph">'
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}">{"".join(parts)}</svg></div>'
            f"{_legend()}</section>")


def _legend() -> str:
    bands, low = [], "-inf"
    for bound, fill in SNR_BANDS:
        high = "inf" if math.isinf(bound) else f"{bound:.0f}"
        bands.append(f'<span class="sw" style="background:{fill}"></span>{low}..{high} dB ')
        low = high
    return f'<p class="legend">{"".join(bands)}</p>'


def histogram_svg(hist: Histogram, width: float = 260.0, height: float = 90.0) -> str:
    """Bars of log(1 + count) over |x|, and the clip threshold as a red line."""
    counts = hist.counts
    top = max(math.log1p(c) for c in counts) or 1.0
    span = hist.bin_width * len(counts) or 1.0
    bar = width / len(counts)
    parts = []
    for i, count in enumerate(counts):
        if count:
            h = (height - 14) * math.log1p(count) / top
            parts.append(f'<rect x="{i * bar:.2f}" y="{height - 14 - h:.2f}" '
                         f'width="{max(bar - 0.3, 0.5):.2f}" height="{h:.2f}" fill="#495057"/>')
    clip_x = min(hist.clip / span, 1.0) * width
    parts.append(f'<line x1="{clip_x:.2f}" x2="{clip_x:.2f}" y1="0" y2="{height - 14:.0f}" '
                 'stroke="#e03131" stroke-width="2"/>')
    parts.append(f'<text x="0" y="{height - 2:.0f}">0</text><text x="{width:.0f}" '
                 f'y="{height - 2:.0f}" text-anchor="end">{span:.3g}</text>')
    return (f'<svg class="hist" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}">{"".join(parts)}</svg>')


def _histograms(result: CompareResult) -> str:
    cells = []
    for tensor in result.tensors:
        if tensor.histogram is None:
            continue
        graph = tensor.graph.snr_db if tensor.graph else None
        local = tensor.local.snr_db if tensor.local else None
        cells.append(
            f'<figure data-tensor="{escape(tensor.name)}">{histogram_svg(tensor.histogram)}'
            f"<figcaption><b>{escape(tensor.name)}</b><br>clip {tensor.histogram.clip:.4g}, max "
            f"|x| {tensor.histogram.absmax:.4g} · clipped {_pct(tensor.clipped_fraction)}<br>"
            f"SNR graph {decibels(graph)} dB, local {decibels(local)} dB</figcaption></figure>")
    return ('<section><h2>quantized activations: |x| histogram (float model, log counts), red: '
            f'clip range</h2><div id="hists">{"".join(cells)}</div></section>')


def render_html(result: CompareResult) -> str:
    data = json.dumps(to_jsonable(result), allow_nan=False, sort_keys=False).replace("</", "<\\/")
    worst = decibels(result.output_snr_db)
    summary = (f"{Path(result.quant_model).name} vs {Path(result.float_model).name} · "
               f"{result.samples} samples · worst output SNR {worst} dB · "
               f"{len(result.nodes)} quantized nodes")
    content = "".join([
        _cards(result), _table(result), _graph_svg(result), _histograms(result),
        f'<script type="application/json" id="compare-data">{data}</script>',
    ])
    return render_page(HtmlPage(
        title=f"{Path(result.quant_model).name} · qdqkit compare",
        heading=f"qdqkit compare: {Path(result.quant_model).name}", summary=summary,
        tools_html='<input id="search" type="search" placeholder="find node"> ',
        content_html=content, details_hint="Click a row or a node for its details.",
        css=_asset("compare.css"), script=_asset("compare.js"),
    ))


def check_html_output(output: Path) -> None:
    """Refuse a report path that is not an .html file (before any work is done)."""
    if output.suffix.lower() not in (".html", ".htm"):
        raise OutputError(f"{output}: the report is HTML; choose a .html file name")


def write_html(result: CompareResult, output: Path, protected: tuple[Path, ...] = ()) -> Path:
    check_html_output(output)
    return write_text_atomic(output, render_html(result), protected=protected)
