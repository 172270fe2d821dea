"""``qdqkit lint MODEL [--trt V] [--target gpu|dla] [--gpu NAME] [--shapes S] [--json] [--engine X]``."""

from __future__ import annotations

import argparse
from typing import Any

from qdqkit.cli.args import (
    JsonArgs,
    LatencyArgs,
    TargetArgs,
    TrtArgs,
    add_groups,
    recorded_settings,
)
from qdqkit.cli.startup import without_blas_threads
from qdqkit.report.json_output import print_json
from qdqkit.report.text import macs, shorten, table

_SHOWN_PER_RULE = 12
TRT, TARGET = TrtArgs(from_model=True), TargetArgs(from_model=True)
JSON, LATENCY = JsonArgs(), LatencyArgs()


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "lint",
        help="predict the TensorRT engine of a Q/DQ model and name every fusion breaker",
        description="Predict the engine TensorRT builds from a Q/DQ ONNX model (fused layers, "
        "precisions, Reformat layers) and report each Q/DQ placement that costs speed or "
        "accuracy, grouped by rule. Exit code 1 when there are errors.",
    )
    parser.add_argument("model", help="the ONNX model")
    add_groups(parser, TRT, TARGET, JSON, LATENCY)
    parser.add_argument("--engine", metavar="REAL.graph.json",
                        help="compare with a real 'trtexec --exportLayerInfo' export")
    parser.add_argument("--layers", action="store_true",
                        help="also list the predicted layers with their predicted time")
    parser.add_argument("--explain", action="store_true",
                        help="also print the latency cost model and its fitted constants")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    without_blas_threads()
    from qdqkit.linting import lint

    latency = LATENCY.parse(args)
    result = lint(args.model, trt=TRT.given(args), target=TARGET.given(args), engine=args.engine,
                  gpu=args.gpu and latency.gpu, shapes=latency.shapes)
    if JSON.parse(args):
        print_json(result)
    else:
        print(render(result, show_layers=args.layers, explain=args.explain))
    return result.exit_code


def _latency_lines(result: Any, explain: bool) -> list[str]:
    latency = result.latency
    if latency is None:
        return []
    shapes = ", ".join(f"{n} {'x'.join(str(d) for d in dims)}"
                       for n, dims in latency.input_shapes.items())
    lines = ["", f"predicted latency on {latency.gpu} (inputs {shapes or 'unknown'}):",
             f"  as it is        {latency.as_is.total_ms:.3f} ms"]
    if result.quantized:
        verdict = "faster" if latency.speedup > 1.0 else "NOT faster"
        lines.append(f"  built FP16      {latency.fp16.total_ms:.3f} ms (no Q/DQ): INT8 is "
                     f"{verdict} ({latency.speedup:.2f}x)")
    costliest = ", ".join(f"{shorten(t.layer, 40)} {t.time_ms:.3f} ms"
                          for t in latency.as_is.costliest(3))
    lines.append(f"  costliest       {costliest}")
    lines += [f"  note: {note}" for note in latency.as_is.notes]
    if explain:
        from qdqkit.trt.cost_model import FITTED, RULES_TEXT

        lines += ["", "cost model:"] + [f"  {line}" for line in RULES_TEXT]
        lines += ["fitted constants (five real ResNet-18 engines, A100):"]
        lines += [f"  {name:<28}{value}" for name, value in FITTED.explain()]
    return lines


def render(result: Any, show_layers: bool = False, explain: bool = False) -> str:
    engine = result.engine
    lines = [
        f"{result.model}: TensorRT {result.trt} ({engine.metadata.get('builder', '')}), "
        f"target {result.target}",
    ]
    if result.from_model:
        lines.append(f"  ({recorded_settings(result.from_model)})")
    if not result.quantized:
        lines.append("this model has no Q/DQ nodes: it is a float model")
    for group in result.groups:
        lines.append("")
        fix = ", fixable" if group.fixable else ""
        lines.append(f"{group.code} {group.name} [{group.severity}; rule {group.rule_id}{fix}] "
                     f"x{len(group.findings)}")
        lines.append(f"  {group.summary}")
        for finding in group.findings[:_SHOWN_PER_RULE]:
            mark = "" if finding.severity == group.severity else f" ({finding.severity})"
            lines.append(f"  - {finding.message}{mark}")
            if finding.cost:
                lines.append(f"      cost: {finding.cost}")
        if len(group.findings) > _SHOWN_PER_RULE:
            lines.append(f"  ... and {len(group.findings) - _SHOWN_PER_RULE} more (--json lists all)")
    s = result.summary
    by_precision = ", ".join(f"{p} {n}" for p, n in s.layers_by_precision.items()) or "none"
    share = "unknown (no shapes)" if s.int8_mac_share is None else f"{s.int8_mac_share:.1%}"
    lines += [
        "",
        "predicted engine:",
        f"  layers          {s.layers - s.reformats} compute, by input precision: {by_precision}",
        f"  INT8 outputs    {s.int8_output_layers} layers write INT8 (their Q fused)",
        f"  Reformats       {s.reformats} ({s.qdq_reformats} from Q/DQ nodes)",
        f"  INT8 MACs       {share} of {macs(s.total_macs)}{s.mac_caveat()}",
        f"  elided nodes    {s.elided_nodes} (copies and Concats with no layer of their own)",
    ]
    if s.devices:
        lines.append("  devices         " + ", ".join(f"{d} {n}" for d, n in s.devices.items()))
    lines += _latency_lines(result, explain)
    if show_layers:
        times = result.latency.as_is.layers if result.latency is not None else []
        rows = [[layer.kind.value, layer.name[:70], "+".join(str(t.precision) for t in layer.inputs),
                 "+".join(str(t.precision) for t in layer.outputs), layer.origin or "",
                 f"{times[i].time_ms:.4f}" if i < len(times) else "-"]
                for i, layer in enumerate(engine.layers)]
        lines += ["", table(rows, ["kind", "layer", "in", "out", "origin", "ms"])]
    if result.comparison is not None:
        c = result.comparison
        lines += [
            "",
            f"compared with {c.real_engine}: {c.matched_layers} layers matched",
            f"  Q/DQ Reformats            predicted {c.predicted_qdq_reformats}, "
            f"real {c.real_qdq_reformats}",
            f"  convolutions writing INT8 predicted {c.predicted_int8_conv_outputs}, "
            f"real {c.real_int8_conv_outputs}",
        ]
        if c.disagreements:
            lines.append(f"  {len(c.disagreements)} disagreements:")
            lines.append(table([[d.subject, d.predicted, d.real] for d in c.disagreements],
                               ["what", "predicted", "real"]))
        else:
            lines.append("  no disagreements")
    lines += ["", f"{result.errors} errors, {result.warnings} warnings, "
              f"{result.count(_info())} info"]
    return "\n".join(lines)


def _info() -> Any:
    from qdqkit.rules import Severity

    return Severity.INFO
