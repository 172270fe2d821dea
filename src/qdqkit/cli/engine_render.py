"""Plain-text rendering of ``qdqkit engine report`` and ``qdqkit engine diff`` results."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qdqkit.report.text import milliseconds, share, shorten, table

if TYPE_CHECKING:
    from qdqkit.engine.diff import EngineDiff
    from qdqkit.engine.report import Bucket, EngineReport

_NAME_WIDTH = 72


def _bucket_table(title: str, buckets: list[Bucket], total: float | None) -> list[str]:
    rows: list[list[object]] = [
        [b.key, b.layers, milliseconds(b.latency_ms),
         share(b.latency_ms / total) if total and b.latency_ms is not None else "-"]
        for b in buckets
    ]
    return ["", table(rows, [title, "layers", "ms", "time"])]


def render_report(report: EngineReport) -> str:
    total = report.total_layer_latency_ms
    others = "".join(f", {n} {role}" for role, n in report.non_compute_counts.items())
    lines = [
        f"engine     {report.source}   ({report.schema} export"
        + (", names only" if report.names_only else "") + ")",
        f"layers     {report.layer_count} ({report.compute_layer_count} compute{others})",
    ]
    if total is not None:
        measure = f" {report.layer_latency_measure}" if report.layer_latency_measure else ""
        timing = f"latency    {total:.3f} ms summed over layers (profile{measure})"
        if report.end_to_end_median_ms is not None:
            timing += (f"; end to end {report.end_to_end_median_ms:.3f} ms "
                       f"({report.end_to_end_source})")
        lines.append(timing)
    if report.names_only:
        lines.append("INT8       unknown: a names-only export has no precisions (build with "
                     "--profilingVerbosity=detailed)")
    else:
        lines.append(
            f"INT8       {share(report.int8_layer_share)} of compute layers, "
            f"{share(report.int8_time_share)} of time"
        )
    lines += _bucket_table("layer type", report.by_kind, total)
    lines += _bucket_table("precision (compute layers)", report.by_precision, total)
    lines += _bucket_table("type and precision (inputs → output)", report.by_kind_and_precision,
                           total)
    if report.reformats:
        rows: list[list[object]] = [
            [shorten(r.name, 56), r.origin, f"{r.from_precision} → {r.to_precision}",
             milliseconds(r.latency_ms), "yes" if r.next_to_qdq else ""]
            for r in report.reformats
        ]
        lines += ["", f"Reformat layers: {report.qdq_reformat_count} from Q/DQ, "
                      f"{report.layout_reformat_count} layout",
                  table(rows, ["reformat", "origin", "precision", "ms", "next to Q/DQ"])]
    if report.slowest:
        rows = [[shorten(s.name, 64), s.kind, s.precision, milliseconds(s.latency_ms),
                 share(s.share)] for s in report.slowest]
        lines += ["", table(rows, ["slowest layers", "type", "precision", "ms", "time"])]
    if report.findings:
        lines += ["", "findings:"]
        for f in report.findings:
            cost = f" [{f.latency_ms:.3f} ms]" if f.latency_ms else ""
            lines.append(f"  {f.severity:<7} {f.rule.name}: {f.message}{cost}")
            shown = ", ".join(shorten(n, 48) for n in f.layers[:4])
            if shown:
                more = f" (+{len(f.layers) - 4} more)" if len(f.layers) > 4 else ""
                lines.append(f"          {shown}{more}")
    return "\n".join(lines)


def _int8_count(compute: int, int8: int | None) -> str:
    return f"{compute} ({'INT8 unknown' if int8 is None else int8})"


def _measures(diff: EngineDiff) -> str:
    """`` (averageMs)``: what the summed layer times sum, once when both sides agree."""
    found = [m for m in (diff.a.layer_latency_measure, diff.b.layer_latency_measure) if m]
    if not found:
        return ""
    return f" ({found[0]})" if len(set(found)) == 1 else f" ({' / '.join(found)})"


def render_diff(diff: EngineDiff, *, every_layer: bool = False) -> str:
    from qdqkit.engine.diff import short_source, signed_ms

    a, b = diff.a, diff.b
    # Weak evidence makes every pair a guess; the tables must not read as facts.
    pairs = "guessed pairs" if diff.match_evidence.weak else "matched layers"
    rows: list[list[object]] = [
        ["layers", a.layers, b.layers],
        ["compute layers (INT8)", _int8_count(a.compute_layers, a.int8_compute_layers),
         _int8_count(b.compute_layers, b.int8_compute_layers)],
        ["Reformats (Q/DQ, layout)", f"{a.reformats} ({a.qdq_reformats}, {a.layout_reformats})",
         f"{b.reformats} ({b.qdq_reformats}, {b.layout_reformats})"],
        [f"summed layer time ms{_measures(diff)}", milliseconds(a.layer_latency_ms),
         milliseconds(b.layer_latency_ms)],
        ["end-to-end median ms", milliseconds(a.end_to_end_median_ms),
         milliseconds(b.end_to_end_median_ms)],
    ]
    lines = [f"A  {a.source}", f"B  {b.source}", "",
             table(rows, ["", f"A {short_source(a)}", f"B {short_source(b)}"]), "", "why:"]
    lines += [f"  - {line}" for line in diff.summary]
    if diff.precision_changes:
        rows = [[shorten(m.b, 60), m.precision_a, m.precision_b, milliseconds(m.latency_a_ms),
                 milliseconds(m.latency_b_ms)] for m in diff.precision_changes]
        title = "precision changes (" + ("guessed pairs, " if diff.match_evidence.weak else "")
        lines += ["", table(rows, [f"{title}layer in B)", "A", "B", "A ms", "B ms"])]
    for group in diff.fused:
        side = "B" if group.engine == "a" else "A"
        maybe = "maybe " if diff.match_evidence.weak else ""
        lines += ["", f"{maybe}fused in {side} into '{shorten(group.into, 60)}' "
                      f"({milliseconds(group.latency_before_ms)} → "
                      f"{milliseconds(group.latency_after_ms)} ms):"]
        lines += [f"  {shorten(name, _NAME_WIDTH)}" for name in group.layers]
    for title, lone in (("only in A", diff.only_in_a), ("only in B", diff.only_in_b)):
        if lone:
            rows = [[shorten(la.name, 60), la.kind, la.precision, la.origin or "",
                     milliseconds(la.latency_ms)] for la in lone]
            lines += ["", table(rows, [title, "type", "precision", "origin", "ms"])]
    changed = sorted((m for m in diff.matched if m.delta_ms), key=lambda m: -abs(m.delta_ms or 0))
    if changed:
        rows = [[shorten(m.b, 60), milliseconds(m.latency_a_ms), milliseconds(m.latency_b_ms),
                 signed_ms(m.delta_ms or 0.0)] for m in changed[:10]]
        lines += ["", table(rows, [f"largest changes ({pairs})", "A ms", "B ms", "delta"])]
    if every_layer:
        rows = [[shorten(m.a, 48), shorten(m.b, 48), m.precision_a, m.precision_b,
                 milliseconds(m.latency_a_ms), milliseconds(m.latency_b_ms),
                 "" if m.delta_ms is None else signed_ms(m.delta_ms)] for m in diff.matched]
        lines += ["", table(rows, ["layer in A", "layer in B", "A", "B", "A ms", "B ms",
                                   "delta"])]
    return "\n".join(lines)
