"""``qdqkit lint MODEL`` and ``qdqkit rules [CODE]``."""

from __future__ import annotations

import argparse
from typing import Any

from qdqkit.cli.output import print_json, table

_SHOWN_PER_RULE = 12


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "lint",
        help="predict the TensorRT engine of a Q/DQ model and name every fusion breaker",
        description="Predict the engine TensorRT builds from a Q/DQ ONNX model (fused layers, "
        "precisions, Reformat layers) and report each Q/DQ placement that costs speed or "
        "accuracy, grouped by rule. Exit code 1 when there are errors.",
    )
    parser.add_argument("model", help="the ONNX model")
    parser.add_argument("--trt", default="8.6", choices=("8.6", "10", "11"),
                        help="TensorRT version to predict for (default 8.6; 11 is strongly typed)")
    parser.add_argument("--target", default="gpu", choices=("gpu", "dla"))
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--engine", metavar="REAL.graph.json",
                        help="compare with a real 'trtexec --exportLayerInfo' export")
    parser.add_argument("--layers", action="store_true", help="also list the predicted layers")
    parser.set_defaults(run=run)

    rules = subparsers.add_parser(
        "rules", help="list the lint rules, or explain one",
        description="List the lint rule catalog, or explain one rule: why it costs, what to do, "
        "where it comes from.",
    )
    rules.add_argument("code", nargs="?", help="a rule code or name, e.g. QDQ201 or "
                       "residual-skip-float")
    rules.add_argument("--json", action="store_true", help="print as JSON")
    rules.set_defaults(run=run_rules)


def run(args: argparse.Namespace) -> int:
    from qdqkit.linting import lint

    result = lint(args.model, trt=args.trt, target=args.target, engine=args.engine)
    if args.json:
        print_json(result)
    else:
        print(render(result, show_layers=args.layers))
    return result.exit_code


def _macs(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return str(n)


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
        f"  INT8 MACs       {share} of {_macs(s.total_macs)}",
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


def run_rules(args: argparse.Namespace) -> int:
    from qdqkit.rules import all_rules, rule

    if args.code:
        found = rule(args.code)
        if args.json:
            print_json(found)
            return 0
        print(f"{found.code} {found.name} [{found.severity}]\n")
        print(f"  {found.summary}\n")
        print(f"why it costs   {found.why}")
        print(f"what to do     {found.what_to_do}")
        print(f"how it checks  {found.how_it_checks}")
        fixable = "yes: a mechanical graph rewrite repairs it" if found.fixable else "no"
        print(f"fixable        {fixable}")
        print(f"rule base      {found.rule_id} (docs/tensorrt-qdq-rules.md)")
        return 0
    if args.json:
        print_json(list(all_rules()))
        return 0
    rows = [[r.code, str(r.severity), r.name, r.rule_id, "yes" if r.fixable else ""]
            for r in all_rules()]
    print(table(rows, ["code", "severity", "name", "rule", "fix"]))
    return 0
