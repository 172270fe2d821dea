"""``qdqkit profile MODEL [--data DATA] [--runs N] [-o trace.json] [--json]``.

``MODEL`` is an ONNX model (timed node by node on onnxruntime CPU) or a trtexec JSON export
(``--exportTimes`` or ``*.profile.metadata.json``: host or device bound). The data options are
the shared ones (``--data``, ``--preprocess``, ``--shapes``, ``--batch``, ...); its own flags are
``--runs``, ``--optimized``, ``--top``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from qdqkit.cli.args import DataArgs, JsonArgs, OutputArgs, add_groups
from qdqkit.report.json_output import print_json
from qdqkit.report.text import macs, milliseconds, share, table

JSON, DATA = JsonArgs(), DataArgs(samples=1)
OUTPUT = OutputArgs("write a Chrome trace (JSON) that Perfetto and chrome://tracing open")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "profile",
        help="where inference time goes: per node and op type on onnxruntime CPU, or host vs "
        "device from a trtexec --exportTimes file",
        description="Time an ONNX model node by node on onnxruntime's CPU provider (with MACs "
        "and bytes per node and a Chrome trace), or read a trtexec --exportTimes / "
        "profile.metadata.json file and say whether the host or the GPU sets the pace.",
    )
    parser.add_argument("model", help="an .onnx model, or a trtexec --exportTimes JSON or "
                        "profile.metadata.json")
    parser.add_argument("--runs", type=int, default=10, metavar="N",
                        help="timed runs after one warm-up (default 10)")
    parser.add_argument("--optimized", action="store_true",
                        help="let onnxruntime fuse nodes (its default in deployment); node "
                        "names then follow its fused kernels")
    parser.add_argument("--top", type=int, default=15, metavar="N",
                        help="nodes listed (default 15)")
    add_groups(parser, DATA, OUTPUT, JSON)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if Path(args.model).suffix.lower() == ".json":
        from qdqkit.profiling import read_trtexec_times

        timing = read_trtexec_times(args.model)
        if JSON.parse(args):
            print_json(timing)
        else:
            print(render_timing(timing))
        return 0
    from qdqkit.profiling import profile_model

    data = DATA.parse(args)
    # Random data is one batch, sized by --batch/--shapes (not --samples): profile_model draws it.
    request = data.request() if data.source not in (None, "random") else None
    result = profile_model(args.model, request, runs=args.runs, batch=data.batch,
                           seed=data.seed, shapes=data.shapes, optimized=args.optimized,
                           trace=OUTPUT.parse(args))
    if JSON.parse(args):
        print_json(result)
    else:
        print(render_profile(result, args.top))
    return 0


def _size(value: int | None) -> str:
    if value is None:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= scale:
            return f"{value / scale:.2f} {unit}"
    return f"{value} B"


def render_profile(result: Any, top: int = 15) -> str:
    lines = [
        f"model      {result.model}",
        f"data       {result.data} (batch {result.batch})",
        f"runs       {result.runs} after one warm-up; onnxruntime CPU, graph optimizations "
        + ("on" if result.optimized else "off (one kernel per ONNX node)"),
        f"time       {milliseconds(result.run_ms_median)} ms per run (median); nodes sum to "
        f"{milliseconds(result.node_ms_total)} ms",
        "",
        table([[o.op_type, o.nodes, milliseconds(o.mean_ms), share(o.share), macs(o.macs)]
               for o in result.op_types], ["op type", "nodes", "ms", "time", "MACs"]),
        "",
        table([[n.name, n.op_type, milliseconds(n.mean_ms), share(n.share), macs(n.macs),
                _size(n.bytes),
                "-" if not n.macs or not n.mean_ms else f"{n.macs / n.mean_ms / 1e6:.1f}"]
               for n in result.nodes[:top]],
              ["slowest nodes", "op", "ms", "time", "MACs", "bytes", "GMAC/s"]),
    ]
    if len(result.nodes) > top:
        lines.append(f"... and {len(result.nodes) - top} more nodes (--json lists them all)")
    if result.trace:
        lines.append(f"wrote {result.trace} (open it in Perfetto or chrome://tracing)")
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)


def render_timing(timing: Any) -> str:
    rows = [[p.phase, milliseconds(p.median_ms), milliseconds(p.mean_ms), milliseconds(p.max_ms)]
            for p in timing.phases]
    lines = [
        f"source     {timing.source}",
        "iterations " + ("summary" if timing.iterations is None else str(timing.iterations)),
        "",
        table(rows, ["phase", "median ms", "mean ms", "max ms"]),
        "",
    ]
    if timing.gpu_busy is not None:
        lines.append(f"GPU busy   {timing.gpu_busy:.0%} of the compute span")
    lines.append(f"bound by   {timing.bound}: {timing.reason}")
    lines += [f"note: {n}" for n in timing.notes]
    return "\n".join(lines)
