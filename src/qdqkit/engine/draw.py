"""``draw_engine(graph, "x.html" | "x.svg")``: one self-contained drawing of an engine.

Boxes are layers in data-flow order (top to bottom), filled by the precision the layer computes
in, with a strip on the right in the precision it writes; Reformats have a red (from Q/DQ) or
orange dashed (layout) border; edges take the colour of the tensor's precision; with a profile,
each box shows its time and a bar scaled to the slowest layer. Hovering a box shows the full name,
fused ONNX nodes, tensors and tactic. The HTML page (the shell of ``qdqkit.report.html_page``) adds
zoom, search and a details panel, inlined so the file opens offline.
"""

from __future__ import annotations

from importlib import resources
from itertools import pairwise
from pathlib import Path

from qdqkit.core.atomic import write_text_atomic
from qdqkit.core.errors import OutputError
from qdqkit.engine.layout import Layout, layered_layout
from qdqkit.report.html_page import HtmlPage, escape, render_page
from qdqkit.trt.engine import EngineGraph, EngineLayer, EngineTensor, Precision
from qdqkit.trt.engine_analysis import is_compute, latency_sum, precision_signature, topology

NODE_W, NODE_H, RANK_GAP, NODE_GAP = 270.0, 58.0, 26.0, 24.0
_NAME_CHARS = 36

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


def _clip(text: str, width: int) -> str:
    """Shorten in the middle: fused names differ at both ends (first weight, last Add/Relu)."""
    if len(text) <= width:
        return text
    head = (width - 1) * 3 // 5
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


def _tensor_line(tensor: EngineTensor) -> str:
    shape = "x".join(map(str, tensor.shape)) if tensor.shape else "?"
    return f"{tensor.name} [{shape}] {tensor.precision.value} {tensor.format or ''}".rstrip()


def _tooltip(layer: EngineLayer) -> str:
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
    return "\n".join(lines)


def _node(i: int, layer: EngineLayer, layout: Layout, slowest: float | None) -> str:
    x, y = layout.x[i] - NODE_W / 2, layout.y[i]
    strong, fill = PALETTE[layer.precision]
    out_strong = PALETTE[layer.output_precision][0]
    stroke, dash, width = "#495057", "", 1.0
    label = layer.kind.value
    if layer.is_reformat:
        qdq = layer.origin == "QDQ"
        stroke = QDQ_REFORMAT_STROKE if qdq else LAYOUT_REFORMAT_STROKE
        dash = "" if qdq else ' stroke-dasharray="6 3"'
        width = 3.0
        label = "Reformat · from Q/DQ" if qdq else "Reformat · layout"
    classes = "layer reformat" if layer.is_reformat else "layer"
    parts = [
        f'<g class="{classes}" id="L{i}" data-name="{escape(layer.name)}">',
        f"<title>{escape(_tooltip(layer))}</title>",
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{NODE_W:.0f}" height="{NODE_H:.0f}" rx="5" '
        f'fill="{fill}" stroke="{stroke}" stroke-width="{width}"{dash}/>',
        f'<rect x="{x + NODE_W - 9:.1f}" y="{y + 1:.1f}" width="8" height="{NODE_H - 2:.0f}" '
        f'fill="{out_strong}"/>',
        f'<rect x="{x:.1f}" y="{y:.1f}" width="5" height="{NODE_H:.0f}" fill="{strong}"/>',
        f'<text x="{x + 11:.1f}" y="{y + 16:.1f}" class="k">{escape(label)}</text>',
        f'<text x="{x + 11:.1f}" y="{y + 31:.1f}" class="p">'
        f"{escape(precision_signature(layer))}</text>",
        f'<text x="{x + 11:.1f}" y="{y + 46:.1f}" class="n">'
        f"{escape(_clip(layer.name, _NAME_CHARS))}</text>",
    ]
    if layer.latency_ms is not None and slowest:
        bar = (NODE_W - 24) * min(1.0, layer.latency_ms / slowest)
        parts.append(f'<rect x="{x + 8:.1f}" y="{y + NODE_H - 7:.1f}" width="{bar:.1f}" '
                     f'height="4" fill="#212529" opacity="0.55"/>')
        parts.append(f'<text x="{x + NODE_W - 14:.1f}" y="{y + 16:.1f}" class="t" '
                     f'text-anchor="end">{layer.latency_ms:.3f} ms</text>')
    parts.append("</g>")
    return "".join(parts)


def _curve(points: list[tuple[float, float]]) -> str:
    path = [f"M{points[0][0]:.1f},{points[0][1]:.1f}"]
    for (x0, y0), (x1, y1) in pairwise(points):
        mid = (y0 + y1) / 2
        path.append(f"C{x0:.1f},{mid:.1f} {x1:.1f},{mid:.1f} {x1:.1f},{y1:.1f}")
    return "".join(path)


def _edges(graph: EngineGraph, layout: Layout) -> list[str]:
    topo = topology(graph)
    arcs = set(layout.arcs)
    drawn = []
    for v, preds in enumerate(topo.preds):
        for u in preds:
            colour = PALETTE[topo.edge_precision.get((u, v), Precision.UNKNOWN)][0]
            start = (layout.x[u], layout.y[u] + NODE_H)
            end = (layout.x[v], layout.y[v])
            if (u, v) in arcs:
                side = layout.width - 30.0
                d = (f"M{start[0]:.1f},{start[1]:.1f}C{side:.1f},{start[1]:.1f} {side:.1f},"
                     f"{end[1]:.1f} {end[0]:.1f},{end[1]:.1f}")
            else:
                d = _curve([start, *layout.routes.get((u, v), []), end])
            drawn.append(f'<path d="{d}" stroke="{colour}" class="e" marker-end="url(#arrow)"/>')
    return drawn


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
    parts.append("</g>")
    return "".join(parts)


LEGEND_H = 34.0


def render_svg(graph: EngineGraph) -> str:
    """The drawing as a standalone SVG document (deterministic for a given graph)."""
    topo = topology(graph)
    layout = layered_layout(len(graph.layers), topo.preds, NODE_W, NODE_H, RANK_GAP, NODE_GAP)
    times = [la.latency_ms for la in graph.layers if la.latency_ms is not None]
    slowest = max(times) if times else None
    width = max(layout.width, 760.0)
    height = layout.height + LEGEND_H
    nodes = [_node(i, la, layout, slowest) for i, la in enumerate(graph.layers)]
    return "".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="Helvetica, Arial, sans-serif">',
        "<style>.k{font-size:12px;font-weight:600;fill:#212529}.p{font-size:11px;fill:#212529}.n{font-size:11px;fill:#343a40;"
        "font-family:Menlo,Consolas,monospace}.t{font-size:11px;fill:#212529}"
        ".e{fill:none;stroke-width:1.6;opacity:.75}.legend text{font-size:12px;fill:#212529}"
        ".hit rect:first-of-type{stroke:#f700ff;stroke-width:5}</style>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#495057"/>'
        "</marker></defs>",
        f'<rect width="{width:.0f}" height="{height:.0f}" fill="#ffffff"/>',
        _legend(),
        f'<g transform="translate(0,{LEGEND_H:.0f})">',
        *_edges(graph, layout),
        *nodes,
        "</g></svg>\n",
    ])


def _summary_line(graph: EngineGraph) -> str:
    compute = [la for la in graph.layers if is_compute(la)]
    int8 = sum(1 for la in compute if la.precision is Precision.INT8)
    parts = [f"{len(graph)} layers", f"{int8}/{len(compute)} compute layers INT8",
             f"{len(graph.reformats())} Reformats ({len(graph.qdq_reformats())} from Q/DQ)"]
    total = latency_sum(graph.layers)
    if total is not None:
        parts.append(f"{total:.3f} ms summed layer time")
    return " · ".join(parts)


def _asset(name: str) -> str:
    return resources.files("qdqkit.engine").joinpath("static").joinpath(name).read_text(encoding="utf-8")


_ZOOM_AND_SEARCH = (
    '<button id="zoom-out" title="zoom out">−</button>'
    '<button id="zoom-in" title="zoom in">+</button><button id="fit">fit width</button>'
    '<input id="search" type="search" placeholder="find layer or ONNX node"> '
    '<span id="hits"></span>'
)


def render_html(graph: EngineGraph) -> str:
    title = Path(graph.source).name if graph.source != "predicted" else "predicted engine"
    return render_page(HtmlPage(
        title=f"{title} · qdqkit engine", heading=title, summary=_summary_line(graph),
        tools_html=_ZOOM_AND_SEARCH, content_html=render_svg(graph),
        details_hint="Click a layer for its details.",
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
