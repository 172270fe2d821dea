"""``qdqkit engine report|draw|diff|build``: TensorRT engine exports, read and compared."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from qdqkit.cli.output import print_json
from qdqkit.trt.engine import EngineGraph


class _EngineParser(argparse.ArgumentParser):
    """Keeps everything after ``--`` for trtexec when ``pass_through`` is set.

    argparse alone cannot: a trailing ``nargs="*"`` positional is filled (empty) together with the
    model, so arguments after ``--`` that follow an option are rejected as unrecognized.
    """

    pass_through = False

    def parse_known_args(  # type: ignore[override]
        self, args: Any = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        extra: list[str] = []
        if self.pass_through and args is not None and "--" in args:
            args = list(args)
            cut = args.index("--")
            args, extra = args[:cut], args[cut + 1:]
        parsed, rest = super().parse_known_args(args, namespace)
        if self.pass_through:
            parsed.trtexec_args = extra
        return parsed, rest


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "engine",
        help="report, draw, diff or build TensorRT engines (trtexec --exportLayerInfo JSON)",
        description="Read the JSON that trtexec --exportLayerInfo/--exportProfile write (TensorRT "
        "8.x to 11.x) and report, draw or compare the engines.",
    )
    commands = parser.add_subparsers(dest="engine_command", metavar="SUBCOMMAND", required=True,
                                     parser_class=_EngineParser)

    report = commands.add_parser(
        "report", help="layers and time by type and precision, Reformats, findings",
        description="Layers and latency by type and precision, Reformat layers and their origin, "
        "the INT8 share of layers and time, the slowest layers and what to fix.",
    )
    report.add_argument("graph", help="ENGINE.graph.json (trtexec --exportLayerInfo)")
    _timing_arguments(report, "")
    report.add_argument("--top", type=int, default=10, help="how many slowest layers to list")
    report.add_argument("--json", action="store_true", help="print the result as JSON")
    report.set_defaults(run=run_report)

    draw = commands.add_parser(
        "draw", help="draw the engine graph to one self-contained SVG or HTML file",
        description="Draw the engine graph, layers coloured by precision, Reformats marked and "
        "latency shown when a profile is given. The file opens offline in any browser.",
    )
    draw.add_argument("graph", help="ENGINE.graph.json (trtexec --exportLayerInfo)")
    _timing_arguments(draw, "")
    draw.add_argument("-o", "--output", required=True, help="FILE.html or FILE.svg")
    draw.set_defaults(run=run_draw)

    diff = commands.add_parser(
        "diff", help="compare two engines layer by layer and say why B is slower or faster",
        description="Match the layers of two engines by their fused ONNX nodes and list precision "
        "changes, fused and lone layers, Reformat counts and latency. A side given as an .onnx "
        "model is the engine qdqkit predicts TensorRT would build from it.",
    )
    diff.add_argument("a", help="engine A: ENGINE.graph.json, or MODEL.onnx to predict it")
    diff.add_argument("b", help="engine B: ENGINE.graph.json, or MODEL.onnx to predict it")
    _timing_arguments(diff, "-a")
    _timing_arguments(diff, "-b")
    diff.add_argument("--trt", default="8.6", help="TensorRT version to predict .onnx sides for")
    diff.add_argument("--target", default="gpu", choices=("gpu", "dla"),
                      help="device to predict .onnx sides for")
    diff.add_argument("--json", action="store_true", help="print the result as JSON")
    diff.set_defaults(run=run_diff)

    build = commands.add_parser(
        "build", help="build an engine with trtexec (needs TensorRT), export it and report",
        description="Run trtexec on MODEL.onnx with the export flags (--exportLayerInfo, "
        "--exportProfile, --profilingVerbosity=detailed) and the precision flags the installed "
        "TensorRT accepts, then report. Arguments after -- go to trtexec unchanged.",
        usage="qdqkit engine build MODEL.onnx [--int8|--fp16|--best|--strongly-typed] "
        "[-o DIR] [-- TRTEXEC_ARGS ...]",
    )
    build.add_argument("model", help="the ONNX model")
    precision = build.add_mutually_exclusive_group()
    for flag in ("int8", "fp16", "best", "strongly-typed"):
        precision.add_argument(f"--{flag}", dest="precision", action="store_const", const=flag,
                               help=f"build with trtexec's {flag} mode (if this TensorRT has it)")
    build.add_argument("-o", "--output-dir", default=None,
                       help="folder for the engine and its JSON files (default: beside the model)")
    build.pass_through = True
    build.set_defaults(run=run_build, trtexec_args=[])


def _timing_arguments(parser: argparse.ArgumentParser, suffix: str) -> None:
    side = f" of engine {suffix[1:].upper()}" if suffix else ""
    parser.add_argument(f"--profile{suffix}", default=None,
                        help=f"per-layer timings{side} (trtexec --exportProfile JSON)")
    parser.add_argument(f"--timing{suffix}", default=None,
                        help=f"end-to-end timing{side}: trtexec log, --exportTimes JSON or a "
                        "performance_summary JSON (default: X.profile.metadata.json beside the "
                        "profile, if any)")


def _read(graph: str, profile: str | None, timing: str | None) -> EngineGraph:
    from qdqkit.trt.engine_json import read_engine_graph

    return read_engine_graph(graph, profile=profile, timing=timing)


def _side(path: str, profile: str | None, timing: str | None, args: argparse.Namespace) -> EngineGraph:
    if Path(path).suffix.lower() == ".onnx":
        # The predictor lives with lint; imported here so report/draw never pay for onnx.
        from qdqkit.trt.predict import predict_engine

        return predict_engine(path, trt=args.trt, target=args.target)
    return _read(path, profile, timing)


def run_report(args: argparse.Namespace) -> int:
    from qdqkit.cli.engine_render import render_report
    from qdqkit.engine.report import report_engine

    result = report_engine(_read(args.graph, args.profile, args.timing), top=args.top)
    if args.json:
        print_json(result)
    else:
        print(render_report(result))
    return 0


def run_draw(args: argparse.Namespace) -> int:
    from qdqkit.engine.draw import draw_engine

    graph = _read(args.graph, args.profile, args.timing)
    inputs = tuple(Path(p) for p in (args.graph, args.profile, args.timing) if p)
    draw_engine(graph, Path(args.output), protected=inputs)
    print(f"wrote {args.output} ({len(graph)} layers)")
    return 0


def run_diff(args: argparse.Namespace) -> int:
    from qdqkit.cli.engine_render import render_diff
    from qdqkit.engine.diff import diff_engines

    a = _side(args.a, args.profile_a, args.timing_a, args)
    b = _side(args.b, args.profile_b, args.timing_b, args)
    result = diff_engines(a, b)
    if args.json:
        print_json(result)
    else:
        print(render_diff(result))
    return 0


def run_build(args: argparse.Namespace) -> int:
    from qdqkit.cli.engine_render import render_report
    from qdqkit.engine.build import build_engine
    from qdqkit.engine.report import report_engine

    built = build_engine(
        Path(args.model), precision=args.precision,
        output_dir=Path(args.output_dir) if args.output_dir else None,
        extra_args=list(args.trtexec_args),
    )
    for note in built.notes:
        print(f"note: {note}")
    print("ran: " + " ".join(built.command))
    print(f"wrote {', '.join(str(p) for p in built.files)}\n")
    print(render_report(report_engine(built.graph)))
    return 0
