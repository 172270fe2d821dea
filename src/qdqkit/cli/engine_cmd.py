"""``qdqkit engine report|draw|diff|build``: TensorRT engine exports, read and compared."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qdqkit.cli.args import (
    ArgGroup,
    JsonArgs,
    LatencyArgs,
    OutputArgs,
    TargetArgs,
    TrtArgs,
    add_groups,
)
from qdqkit.report.json_output import print_json

if TYPE_CHECKING:
    from qdqkit.trt.engine import EngineGraph


@dataclass(frozen=True)
class EngineFiles:
    """One engine's trtexec exports: the layer graph, and optionally its profile and timing."""

    graph: str
    profile: str | None
    timing: str | None

    def read(self) -> EngineGraph:
        from qdqkit.trt.engine_json import read_engine_graph

        # The reader refuses a profile of another engine, for every caller alike.
        return read_engine_graph(self.graph, profile=self.profile, timing=self.timing)

    def paths(self) -> tuple[Path, ...]:
        return tuple(Path(p) for p in (self.graph, self.profile, self.timing) if p)


class EngineArgs(ArgGroup[EngineFiles]):
    """The positional engine graph plus ``--profile``/``--timing`` for it; ``side`` names one of
    two engines (``a`` -> ``a``, ``--profile-a``, ``--timing-a``)."""

    def __init__(self, side: str = "") -> None:
        self.side = side

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        suffix = f"-{self.side}" if self.side else ""
        of = f" of engine {self.side.upper()}" if self.side else ""
        if self.side:
            parser.add_argument(self.side, help=f"engine {self.side.upper()}: ENGINE.graph.json, "
                                "or MODEL.onnx to predict it")
        else:
            parser.add_argument("graph", help="ENGINE.graph.json (trtexec --exportLayerInfo)")
        parser.add_argument(f"--profile{suffix}", default=None,
                            help=f"per-layer timings{of} (trtexec --exportProfile JSON)")
        parser.add_argument(f"--timing{suffix}", default=None,
                            help=f"end-to-end timing{of}: trtexec log, --exportTimes JSON or a "
                            "performance_summary JSON (default: X.profile.metadata.json beside "
                            "the profile, if any)")

    def parse(self, args: argparse.Namespace) -> EngineFiles:
        suffix = f"_{self.side}" if self.side else ""
        graph = getattr(args, self.side) if self.side else args.graph
        profile, timing = getattr(args, f"profile{suffix}"), getattr(args, f"timing{suffix}")
        return EngineFiles(graph, profile, timing)


ENGINE, SIDE_A, SIDE_B = EngineArgs(), EngineArgs("a"), EngineArgs("b")
JSON = JsonArgs()
DRAWING = OutputArgs("FILE.html or FILE.svg", required=True)
BUILD_DIR = OutputArgs("folder for the engine and its JSON files (default: beside the model)",
                       folder=True, aliases=("--output-dir",))
# Only .onnx sides of a diff are predicted; JSON sides are real engines.
LATENCY = LatencyArgs()
TRT, TARGET = TrtArgs(applies_to=" .onnx sides"), TargetArgs(applies_to=" .onnx sides")


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
    add_groups(report, ENGINE)
    report.add_argument("--top", type=_count, default=10,
                        help="how many slowest layers to list (0 or more)")
    add_groups(report, JSON)
    report.set_defaults(run=run_report)

    draw = commands.add_parser(
        "draw", help="draw the engine graph to one self-contained SVG or HTML file",
        description="Draw the engine graph, layers coloured by precision, Reformats marked and "
        "latency shown when a profile is given. The file opens offline in any browser.",
    )
    add_groups(draw, ENGINE, DRAWING)
    draw.set_defaults(run=run_draw)

    diff = commands.add_parser(
        "diff", help="compare two engines layer by layer and say why B is slower or faster",
        description="Match the layers of two engines by their fused ONNX nodes and list precision "
        "changes, fused and lone layers, Reformat counts and latency. A side given as an .onnx "
        "model is the engine qdqkit predicts TensorRT would build from it.",
    )
    diff.add_argument("--layers", action="store_true",
                      help="also list every matched layer with its precision and time on both sides")
    add_groups(diff, SIDE_A, SIDE_B, TRT, TARGET, LATENCY, JSON)
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
    add_groups(build, BUILD_DIR)
    build.pass_through = True
    build.set_defaults(run=run_build, trtexec_args=[])


def _count(text: str) -> int:
    """A whole number of 0 or more (argparse reports the error with the option's name)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def _side(files: EngineFiles, args: argparse.Namespace) -> EngineGraph:
    if Path(files.graph).suffix.lower() == ".onnx":
        # The predictor needs onnx; imported here so report and draw never pay for it.
        from qdqkit.trt.cost_model import annotate, estimate_latency
        from qdqkit.trt.predict import predict_engine

        # A predicted side has no profile: its layer times come from the latency cost model.
        latency = LATENCY.parse(args)
        model: Any = files.graph
        if latency.shapes:
            from qdqkit.core.model_io import load_model
            from qdqkit.core.shape_spec import parse_shapes
            from qdqkit.linting.latency import apply_shapes

            model = load_model(files.graph)
            apply_shapes(model, parse_shapes(latency.shapes))
        engine = predict_engine(model, trt=TRT.parse(args), target=TARGET.parse(args))
        annotate(engine, estimate_latency(engine, latency.gpu))
        return engine
    return files.read()


def run_report(args: argparse.Namespace) -> int:
    from qdqkit.cli.engine_render import render_report
    from qdqkit.engine.report import report_engine

    result = report_engine(ENGINE.parse(args).read(), top=args.top)
    if JSON.parse(args):
        print_json(result)
    else:
        print(render_report(result))
    return 0


def run_draw(args: argparse.Namespace) -> int:
    from qdqkit.engine.draw import draw_engine

    files = ENGINE.parse(args)
    graph = files.read()
    output = DRAWING.given(args)
    draw_engine(graph, Path(output), protected=files.paths())
    print(f"wrote {output} ({len(graph)} layers)")
    return 0


def run_diff(args: argparse.Namespace) -> int:
    from qdqkit.cli.engine_render import render_diff
    from qdqkit.engine.diff import diff_engines

    result = diff_engines(_side(SIDE_A.parse(args), args), _side(SIDE_B.parse(args), args))
    if JSON.parse(args):
        print_json(result)
    else:
        print(render_diff(result, every_layer=args.layers))
    return 0


def run_build(args: argparse.Namespace) -> int:
    from qdqkit.cli.engine_render import render_report
    from qdqkit.engine.build import build_engine
    from qdqkit.engine.report import report_engine

    output_dir = BUILD_DIR.parse(args)
    built = build_engine(
        Path(args.model), precision=args.precision,
        output_dir=Path(output_dir) if output_dir else None,
        extra_args=list(args.trtexec_args),
    )
    for note in built.notes:
        print(f"note: {note}")
    print("ran: " + " ".join(built.command))
    print(f"wrote {', '.join(str(p) for p in built.files)}\n")
    print(render_report(report_engine(built.graph)))
    return 0
