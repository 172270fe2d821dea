"""``qdqkit fix MODEL -o OUT.onnx [--rules CODES] [--calib DATA] [--dry-run] [--json]``."""

from __future__ import annotations

import argparse
from typing import Any

from qdqkit.cli.args import (
    DataArgs,
    JsonArgs,
    OutputArgs,
    TargetArgs,
    TrtArgs,
    add_groups,
    recorded_settings,
)
from qdqkit.core.errors import QdqkitError
from qdqkit.report.json_output import print_json

TRT, TARGET, JSON = TrtArgs(from_model=True), TargetArgs(from_model=True), JsonArgs()
DATA = DataArgs.calibration("calibration data (for a scale no neighbour carries)")
OUTPUT = OutputArgs("the repaired model (.onnx); required unless --dry-run")
_SHOWN = 8


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "fix",
        help="repair a Q/DQ model's placement so TensorRT fuses it",
        description="Apply the fix of every fixable lint finding (or of --rules), re-lint and "
        "repeat until nothing fixable is left; print what changed rule by rule and node by node "
        "and the predicted engine before -> after. Exit code 0 when nothing fixable is left "
        "(or nothing to fix), 1 when a fixable finding remains, 2 on bad input.",
    )
    parser.add_argument("model", help="the Q/DQ ONNX model (any producer)")
    add_groups(parser, OUTPUT)
    parser.add_argument("--rules", default=None, metavar="CODES",
                        help="only these rules' fixes, comma-separated codes or names "
                        "(default: every fixable rule)")
    parser.add_argument("--keep-float", action="append", default=[], metavar="FILE",
                        help="take the nodes listed in FILE out of INT8 and keep them there: one "
                        "name, glob or op type per line, '#' lines are comments (the list "
                        "'compare --fallback' writes)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the plan and what would change; write nothing")
    add_groups(parser, DATA, TRT, TARGET, JSON)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from qdqkit.core.node_list import read_node_lists
    from qdqkit.fixing import fix

    output = OUTPUT.parse(args)
    if output is None and not args.dry_run:
        raise QdqkitError("give -o OUT.onnx for the repaired model, or --dry-run to only see "
                          "what would change")
    data = DATA.parse(args)
    rules = [c.strip() for c in args.rules.split(",") if c.strip()] if args.rules else None
    result = fix(args.model, output=output, rules=rules, trt=TRT.given(args),
                 target=TARGET.given(args), calib=data.request(),
                 keep_float=read_node_lists(args.keep_float),
                 dry_run=args.dry_run, shapes=data.shapes)
    if JSON.parse(args):
        print_json(result.to_json())
    else:
        print(render(result))
    return result.exit_code


def _engine_line(label: str, before: Any, after: Any) -> str:
    return f"  {label:<22}{before} -> {after}"


def _share(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.1%}"


def render(result: Any) -> str:
    note = f"\n  ({recorded_settings(result.from_model)})" if result.from_model else ""
    if result.nothing_to_fix:
        return (f"{result.source}: nothing to fix (no fixable lint finding for TensorRT "
                f"{result.trt} {result.target})" + (f"; written to {result.output}"
                                                    if result.output else "") + note)
    where = "dry run, nothing written" if result.dry_run else (
        f"written to {result.output}" if result.output else "not written")
    lines = [f"fixed {result.source} ({where}) in {result.seconds:.1f} s, "
             f"{result.rounds} round(s): fixable findings {result.fixable_before} -> "
             f"{result.fixable_after}" + note]
    if result.prepared:
        lines += ["", "before the rule fixes:"] + [f"  {c}" for c in result.prepared[:_SHOWN]]
        if len(result.prepared) > _SHOWN:
            lines.append(f"  ... and {len(result.prepared) - _SHOWN} more (--json lists all)")
    if result.unpaid_float:
        lines += ["", "kept float, as quantize would (their INT8 region does not pay for its "
                  "Reformats):"]
        lines += [f"  {node}: {why}" for node, why in list(result.unpaid_float.items())[:_SHOWN]]
        if len(result.unpaid_float) > _SHOWN:
            lines.append(f"  ... and {len(result.unpaid_float) - _SHOWN} more (--json lists all)")
    for code, actions in result.by_rule().items():
        changes = [c for a in actions for c in a.changes]
        lines += ["", f"{code} {actions[0].rule}: {len(actions)} finding(s) fixed"]
        lines += [f"  {c}" for c in changes[:_SHOWN]]
        if len(changes) > _SHOWN:
            lines.append(f"  ... and {len(changes) - _SHOWN} more (--json lists all)")
    b, a = result.before, result.after
    lines += ["", "predicted engine before -> after:",
              _engine_line("Reformat layers", b.reformats, a.reformats),
              _engine_line("layers writing INT8", b.int8_output_layers, a.int8_output_layers),
              _engine_line("convs writing INT8", f"{b.int8_conv_outputs}/{b.convolutions}",
                           f"{a.int8_conv_outputs}/{a.convolutions}"),
              _engine_line("INT8 share of MACs", _share(b.int8_mac_share),
                           _share(a.int8_mac_share))]
    for reason in result.skipped:
        lines += [f"skipped: {reason}"]
    if result.unweighed:
        lines += [f"not weighed: {result.unweighed}"]
    if result.unfixed:
        lines += ["", f"{len(result.unfixed)} fixable finding(s) left:"]
        lines += [f"  {u.code} {u.message} ({u.reason})" for u in result.unfixed[:_SHOWN]]
    return "\n".join(lines)
