"""``qdqkit lint MODEL [--trt V] [--target gpu|dla] [--json] [--engine REAL.graph.json]``."""

from __future__ import annotations

import argparse
from typing import Any

from qdqkit.cli.args import JsonArgs, TargetArgs, TrtArgs, add_groups
from qdqkit.report.json_output import print_json
from qdqkit.report.text import macs, table

_SHOWN_PER_RULE = 12
TRT, TARGET, JSON = TrtArgs(), TargetArgs(), JsonArgs()


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "lint",
        help="predict the TensorRT engine of a Q/DQ model and name every fusion breaker",
        description="Predict the engine TensorRT builds from a Q/DQ ONNX model (fused layers, "
        "precisions, Reformat layers) and report each Q/DQ placement that costs speed or "
        "accuracy, grouped by rule. Exit code 1 when there are errors.",
    )
    parser.add_argument("model", help="the ONNX model")
    add_groups(parser, TRT, TARGET, JSON)
    parser.add_argument("--engine", metavar="REAL.graph.json",
                        help="compare with a real 'trtexec --exportLayerInfo' export")
    parser.add_argument("--layers", action="store_true", help="also list the predicted layers")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from qdqkit.linting import lint

    result = lint(args.model, trt=TRT.parse(args), target=TARGET.parse(args), engine=args.engine)
    if JSON.parse(args):
        print_json(result)
    else:
        print(render(result, show_layers=args.layers))
    return result.exit_code


def render(result: Any, show_layers: bool = False) -> str:
    engine = result.engine
    lines = [
        f"{result.model}: TensorRT {result.trt} ({engine.metadata.get('builder', '')}), "
        f"target {result.target}",
    ]
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
        f"  INT8 MACs       {share} of {macs(s.total_macs)}",
        f"  elided nodes    {s.elided_nodes} (copies and Concats with no layer of their own)",
    ]
    if s.devices:
        lines.append("  devices         " + ", ".join(f"{d} {n}" for d, n in s.devices.items()))
    if show_layers:
        rows = [[layer.kind.value, layer.name[:70], "+".join(str(t.precision) for t in layer.inputs),
                 "+".join(str(t.precision) for t in layer.outputs), layer.origin or ""]
                for layer in engine.layers]
        lines += ["", table(rows, ["kind", "layer", "in", "out", "origin"])]
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
