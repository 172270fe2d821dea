"""``draw_engine(graph, "x.html" | "x.svg")``: one self-contained drawing of an engine.

Boxes are layers in data-flow order, top to bottom, wrapped into side-by-side columns when the
engine is deep (``columns``), so 800 layers fill a screen instead of a 70,000 px strip. Each box is
filled by the precision the layer computes in, with a strip on the right in the precision it writes;
Reformats have a red (from Q/DQ) or orange dashed (layout) border; edges take the colour of the
tensor's precision. With a profile, each box shows its time, its share and a bar, and the ten
slowest layers carry a numbered red halo visible at any zoom. Zero-cost copies are folded into the
box they feed (``drawn_graph``). Names show the part that tells layers apart (``report.names``);
the full name, fused ONNX nodes, tensors and tactic are on hover. The HTML page adds zoom (buttons,
Ctrl+wheel), drag to pan, search (Enter: next), a details panel and the slowest-layer list, all
inlined so the file opens offline.
"""

from __future__ import annotations

from importlib import resources
from itertools import pairwise
from pathlib import Path

from qdqkit.core.atomic import write_text_atomic
from qdqkit.core.errors import OutputError
from qdqkit.engine.columns import Columns, cross_link, wrap_columns
from qdqkit.engine.drawn_graph import DrawnGraph, drawn_graph
from qdqkit.engine.layout import layered_layout
from qdqkit.report.html_page import HtmlPage, escape, render_page
from qdqkit.report.names import common_prefix, display_name
from qdqkit.trt.engine import EngineGraph, EngineLayer, EngineTensor, Precision
from qdqkit.trt.engine_analysis import latency_sum, precision_signature
from qdqkit.trt.engine_json import is_compute_layer

NODE_W, NODE_H, RANK_GAP, NODE_GAP = 240.0, 54.0, 24.0, 24.0
MARGIN = 24.0
_NAME_CHARS = 34

# (strong colour, light fill) per precision.
PALETTE: dict[Precision, tuple[str, str]] = {
    Precision.INT8: ("#2f9e44", "#d3f9d8"),
    Precision.FP16: ("#1c7ed6", "#d0ebff"),
    Precision.BF16: ("#7048e8", "#e5dbff"),
    Precision.FP32: ("#e8590c", "#ffe8cc"),
    Precision.FP8: ("#0c8599", "#c5f6fa"),
    Precision.INT4: ("#5c940d", "#e9fac8"),
    Precision.FP4: ("#5c940d", "#e9fac8"),
    Precision.INT32: ("#868e96", "#f1f3f5"),
    Precision.INT64: ("#868e96", "#f1f3f5"),
    Precision.BOOL: ("#868e96", "#f1f3f5"),
    Precision.UINT8: ("#868e96", "#f1f3f5"),
    Precision.UNKNOWN: ("#adb5bd", "#f8f9fa"),
}
QDQ_REFORMAT_STROKE, LAYOUT_REFORMAT_STROKE = "#c92a2a", "#f08c00"
SLOW_HALO = "#fa5252"


def _tensor_line(tensor: EngineTensor) -> str:
    shape = "x".join(map(str, tensor.shape)) if tensor.shape else "?"
    return f"{tensor.name} [{shape}] {tensor.precision.value} {tensor.format or ''}".rstrip()


def _tooltip(layer: EngineLayer, copies: list[EngineLayer]) -> str:
    lines = [layer.name, f"type: {layer.type_name or layer.kind.value} ({layer.kind.value})",
             f"precision: {precision_signature(layer)}"]
    if layer.origin:
        lines.append(f"origin: {layer.origin}")
    if layer.latency_ms is not None:
        lines.append(f"latency: {layer.latency_ms:.4f} ms")
    if layer.onnx_nodes:
        lines.append("ONNX nodes: " + ", ".join(layer.onnx_nodes))
    lines += [f"in:  {_tensor_line(t)}" for t in layer.inputs]
    lines += [f"out: {_tensor_line(t)}" for t in layer.outputs]
    if layer.tactic:
        lines.append(f"tactic: {layer.tactic}")
    lines += layer.notes
    for copy in copies:
        time = f", {copy.latency_ms:.4f} ms" if copy.latency_ms is not None else ""
        lines.append(f"folded copy ({copy.kind.value}{time}): {copy.name}")
    return "\n".join(lines)


class _Painter:
    def __init__(self, graph: EngineGraph, drawn: DrawnGraph, cols: Columns) -> None:
        self.graph, self.drawn, self.cols = graph, drawn, cols
        self.prefix = common_prefix([graph.layers[i].name for i in drawn.boxes])
        self.rank_of = {p: r + 1 for r, p in enumerate(drawn.slowest)}
        times = [graph.layers[i].latency_ms or 0.0 for i in drawn.boxes]
        self.slowest_ms = max(times, default=0.0)

    def label(self, layer: EngineLayer) -> str:
        if layer.is_reformat:
            return "Reformat · from Q/DQ" if layer.origin == "QDQ" else "Reformat · layout"
        return layer.kind.value

    def node(self, p: int) -> str:
        i = self.drawn.boxes[p]
        layer = self.graph.layers[i]
        x, y = self.cols.x[p] - NODE_W / 2, self.cols.y[p]
        strong, fill = PALETTE[layer.precision]
        out_strong = PALETTE[layer.output_precision][0]
        stroke, dash, width = "#495057", "", 1.0
        if layer.is_reformat:
            qdq = layer.origin == "QDQ"
            stroke = QDQ_REFORMAT_STROKE if qdq else LAYOUT_REFORMAT_STROKE
            dash = "" if qdq else ' stroke-dasharray="6 3"'
            width = 3.0
        copies = [self.graph.layers[c] for c in self.drawn.folded.get(p, [])]
        classes = "layer reformat" if layer.is_reformat else "layer"
        also = "\n".join(c.name for c in copies)
        parts = [
            f'<g class="{classes}" id="L{i}" data-name="{escape(layer.name)}" '
            f'data-cx="{self.cols.x[p]:.1f}" data-cy="{y + NODE_H / 2:.1f}"'
            # A newline character reference survives XML attribute normalization.
            + (f' data-also="{escape(also).replace(chr(10), "&#10;")}"' if copies else "") + ">",
            f"<title>{escape(_tooltip(layer, copies))}</title>",
        ]
        rank = self.rank_of.get(p)
        if rank is not None:
            parts.append(f'<rect class="halo" x="{x - 12:.1f}" y="{y - 9:.1f}" '
                         f'width="{NODE_W + 24:.0f}" height="{NODE_H + 18:.0f}" rx="12" '
                         f'fill="{SLOW_HALO}" opacity="0.45"/>')
        parts += [
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{NODE_W:.0f}" height="{NODE_H:.0f}" rx="5" '
            f'fill="{fill}" stroke="{stroke}" stroke-width="{width}"{dash}/>',
            f'<rect x="{x + NODE_W - 9:.1f}" y="{y + 1:.1f}" width="8" height="{NODE_H - 2:.0f}" '
            f'fill="{out_strong}"/>',
            f'<rect x="{x:.1f}" y="{y:.1f}" width="5" height="{NODE_H:.0f}" fill="{strong}"/>',
            f'<text x="{x + 11:.1f}" y="{y + 15:.1f}" class="k">{escape(self.label(layer))}</text>',
            f'<text x="{x + 11:.1f}" y="{y + 29:.1f}" class="p">'
            f"{escape(precision_signature(layer))}</text>",
            f'<text x="{x + 11:.1f}" y="{y + 44:.1f}" class="n">'
            f"{escape(display_name(layer.name, _NAME_CHARS, self.prefix))}</text>",
        ]
        if layer.latency_ms is not None and self.slowest_ms:
            bar = (NODE_W - 24) * min(1.0, layer.latency_ms / self.slowest_ms)
            parts.append(f'<rect x="{x + 8:.1f}" y="{y + NODE_H - 6:.1f}" width="{bar:.1f}" '
                         f'height="3" fill="#212529" opacity="0.55"/>')
            parts.append(f'<text x="{x + NODE_W - 14:.1f}" y="{y + 15:.1f}" class="t" '
                         f'text-anchor="end">{layer.latency_ms:.3f} ms</text>')
            if self.drawn.total_ms:
                share = layer.latency_ms / self.drawn.total_ms
                parts.append(f'<text x="{x + NODE_W - 14:.1f}" y="{y + 29:.1f}" class="s" '
                             f'text-anchor="end">{share:.1%}</text>')
        if rank is not None:
            parts.append(f'<g class="badge"><circle cx="{x:.1f}" cy="{y:.1f}" r="12" '
                         f'fill="{QDQ_REFORMAT_STROKE}"/><text x="{x:.1f}" y="{y + 4.5:.1f}" '
                         f'class="r" text-anchor="middle">{rank}</text></g>')
        if copies:
            word = "copy" if len(copies) == 1 else "copies"
            parts.append(f'<text x="{x + NODE_W - 4:.1f}" y="{y - 4:.1f}" class="c" '
                         f'text-anchor="end">+{len(copies)} zero-cost {word}</text>')
        parts.append("</g>")
        return "".join(parts)

    def edges(self) -> list[str]:
        cols, drawn = self.cols, self.drawn
        arcs = set(cols.arcs)
        bottom = cols.height - 14.0
        drawn_edges = []
        for v, preds in enumerate(drawn.preds):
            for u in preds:
                colour = PALETTE[drawn.edge_precision.get((u, v), Precision.UNKNOWN)][0]
                if cols.column[u] != cols.column[v]:
                    points = cross_link(cols, u, v, NODE_W, NODE_H, bottom)
                    d = "M" + "L".join(f"{px:.1f},{py:.1f}" for px, py in points)
                    drawn_edges.append(f'<path d="{d}" stroke="{colour}" class="e x" '
                                       'marker-end="url(#arrow)"/>')
                    continue
                start = (cols.x[u], cols.y[u] + NODE_H)
                end = (cols.x[v], cols.y[v])
                if (u, v) in arcs:
                    side = cols.right[cols.column[u]] + 30.0
                    d = (f"M{start[0]:.1f},{start[1]:.1f}C{side:.1f},{start[1]:.1f} {side:.1f},"
                         f"{end[1]:.1f} {end[0]:.1f},{end[1]:.1f}")
                else:
                    d = _curve([start, *cols.routes.get((u, v), []), end])
                drawn_edges.append(f'<path d="{d}" stroke="{colour}" class="e" '
                                   'marker-end="url(#arrow)"/>')
        return drawn_edges


def _curve(points: list[tuple[float, float]]) -> str:
    path = [f"M{points[0][0]:.1f},{points[0][1]:.1f}"]
    for (x0, y0), (x1, y1) in pairwise(points):
        mid = (y0 + y1) / 2
        path.append(f"C{x0:.1f},{mid:.1f} {x1:.1f},{mid:.1f} {x1:.1f},{y1:.1f}")
    return "".join(path)


def _legend() -> str:
    items = [(p.value, PALETTE[p]) for p in (Precision.INT8, Precision.FP16, Precision.BF16,
                                              Precision.FP32, Precision.FP8, Precision.INT32)]
    parts, x = ['<g class="legend">'], 10.0
    for name, (strong, fill) in items:
        parts.append(f'<rect x="{x:.0f}" y="8" width="16" height="14" fill="{fill}" '
                     f'stroke="{strong}" stroke-width="2"/><text x="{x + 21:.0f}" y="20">{name}</text>')
        x += 72
    parts.append(f'<rect x="{x:.0f}" y="8" width="16" height="14" fill="#fff" '
                 f'stroke="{QDQ_REFORMAT_STROKE}" stroke-width="3"/>'
                 f'<text x="{x + 21:.0f}" y="20">Reformat from Q/DQ</text>')
    x += 150
    parts.append(f'<rect x="{x:.0f}" y="8" width="16" height="14" fill="#fff" '
                 f'stroke="{LAYOUT_REFORMAT_STROKE}" stroke-width="3" stroke-dasharray="6 3"/>'
                 f'<text x="{x + 21:.0f}" y="20">Reformat (layout)</text>')
    x += 140
    parts.append(f'<rect x="{x:.0f}" y="6" width="22" height="18" rx="6" fill="{SLOW_HALO}" '
                 f'opacity="0.45"/><text x="{x + 27:.0f}" y="20">slowest layers, numbered</text>')
    parts.append("</g>")
    return "".join(parts)


LEGEND_H = 34.0
_STYLE = (
    "<style>.k{font-size:12px;font-weight:600;fill:#212529}.p{font-size:11px;fill:#212529}"
    ".n{font-size:11px;fill:#343a40;font-family:Menlo,Consolas,monospace}"
    ".t{font-size:11px;font-weight:600;fill:#212529}.s{font-size:11px;fill:#495057}"
    ".r{font-size:12px;font-weight:700;fill:#fff}.c{font-size:10px;fill:#868e96}"
    ".e{fill:none;stroke-width:1.6;opacity:.75}.e.x{stroke-dasharray:5 3;stroke-linejoin:round}"
    ".legend text{font-size:12px;fill:#212529}"
    ".hit rect:first-of-type{stroke:#f700ff;stroke-width:5}"
    ".hit .halo+rect{stroke:#f700ff;stroke-width:5}</style>"
)


def render_svg(graph: EngineGraph, drawn: DrawnGraph | None = None) -> str:
    """The drawing as a standalone SVG document (deterministic for a given graph)."""
    drawn = drawn or drawn_graph(graph)
    layout = layered_layout(len(drawn.boxes), drawn.preds, NODE_W, NODE_H, RANK_GAP, NODE_GAP)
    cols = wrap_columns(layout, NODE_W, NODE_H, MARGIN, aspect=1.5)
    painter = _Painter(graph, drawn, cols)
    width = max(cols.width, 900.0)
    height = cols.height + LEGEND_H
    nodes = [painter.node(p) for p in range(len(drawn.boxes))]
    return "".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="Helvetica, Arial, sans-serif" '
        f'data-layers="{len(graph)}" data-legend="{LEGEND_H:.0f}">',
        _STYLE,
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#495057"/>'
        "</marker></defs>",
        f'<rect width="{width:.0f}" height="{height:.0f}" fill="#ffffff"/>',
        _legend(),
        f'<g transform="translate(0,{LEGEND_H:.0f})">',
        *painter.edges(),
        *nodes,
        "</g></svg>\n",
    ])


def _summary_line(graph: EngineGraph) -> str:
    compute = [la for la in graph.layers if is_compute_layer(la)]
    if graph.metadata.get("names_only"):
        int8 = f"{len(compute)} compute layers, INT8 unknown (names-only export)"
    else:
        count = sum(1 for la in compute if la.precision is Precision.INT8)
        int8 = f"{count}/{len(compute)} compute layers INT8"
    parts = [f"{len(graph)} layers", int8,
             f"{len(graph.reformats())} Reformats ({len(graph.qdq_reformats())} from Q/DQ)"]
    total = latency_sum(graph.layers)
    if total is not None:
        measure = graph.metadata.get("profile_measure")
        parts.append(f"{total:.3f} ms summed layer time" + (f" ({measure})" if measure else ""))
    return " · ".join(parts)


def _slowest_list(graph: EngineGraph, drawn: DrawnGraph) -> str:
    if not drawn.slowest:
        return ""
    prefix = common_prefix([graph.layers[i].name for i in drawn.boxes])
    rows = []
    for rank, p in enumerate(drawn.slowest, start=1):
        layer = graph.layers[drawn.boxes[p]]
        ms = layer.latency_ms or 0.0
        share = f"{ms / drawn.total_ms:.1%}" if drawn.total_ms else ""
        rows.append(f'<li data-layer="L{drawn.boxes[p]}" title="{escape(layer.name)}">'
                    f"<b>{rank}</b> {ms:.3f} ms <i>{share}</i><br>"
                    f"<code>{escape(display_name(layer.name, 44, prefix))}</code></li>")
    return ('<div id="slowest"><h3>Slowest layers</h3><ol>' + "".join(rows) + "</ol></div>")


def _asset(name: str) -> str:
    return resources.files("qdqkit.engine").joinpath("static").joinpath(name).read_text(encoding="utf-8")


_TOOLS = (
    '<button id="zoom-out" title="zoom out (Ctrl+wheel)">−</button>'
    '<button id="zoom-in" title="zoom in (Ctrl+wheel)">+</button>'
    '<button id="fit" title="the whole engine on one screen">fit all</button>'
    '<button id="actual" title="100%: boxes at full size">1:1</button>'
    '<span id="zoom-level">100%</span>'
    '<input id="search" type="search" placeholder="find layer or ONNX node (Enter: next)"> '
    '<span id="hits"></span><span class="hint">drag to pan · click a box for details</span>'
)


def render_html(graph: EngineGraph) -> str:
    title = Path(graph.source).name if graph.source != "predicted" else "predicted engine"
    drawn = drawn_graph(graph)
    return render_page(HtmlPage(
        title=f"{title} · qdqkit engine", heading=title, summary=_summary_line(graph),
        tools_html=_TOOLS, content_html=render_svg(graph, drawn),
        details_hint="Click a layer for its details.", side_html=_slowest_list(graph, drawn),
        css=_asset("viewer.css"), script=_asset("viewer.js"),
    ))


def draw_engine(graph: EngineGraph, output: Path, protected: tuple[Path, ...] = ()) -> Path:
    """Write ``output`` (.html or .svg) atomically; the inputs in ``protected`` are never touched."""
    suffix = output.suffix.lower()
    if suffix not in (".html", ".htm", ".svg"):
        raise OutputError(f"{output}: choose a .html or .svg file name")
    text = render_svg(graph) if suffix == ".svg" else render_html(graph)
    if suffix == ".svg":
        text = '<?xml version="1.0" encoding="UTF-8"?>\n' + text
    return write_text_atomic(output, text, protected=protected)
