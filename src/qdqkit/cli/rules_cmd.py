"""``qdqkit rules [CODE] [--json]``: the lint rule catalog, listed or one rule explained.

Reads only the catalog's metadata, so it must not pull in the model stack (onnx, onnx-ir).
"""

from __future__ import annotations

import argparse
from typing import Any

from qdqkit.cli.args import JsonArgs, add_groups
from qdqkit.report.json_output import print_json
from qdqkit.report.text import table

JSON = JsonArgs()


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "rules", help="list the lint rules, or explain one",
        description="List the lint rule catalog, or explain one rule: why it costs, what to do, "
        "where it comes from.",
    )
    parser.add_argument("code", nargs="?", help="a rule code or name, e.g. QDQ201 or fp32-in-int8-engine")
    add_groups(parser, JSON)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from qdqkit.rules import all_rules, rule

    if args.code:
        found = rule(args.code)
        if JSON.parse(args):
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
    if JSON.parse(args):
        print_json(list(all_rules()))
        return 0
    rows = [[r.code, str(r.severity), r.name, r.rule_id, "yes" if r.fixable else ""]
            for r in all_rules()]
    print(table(rows, ["code", "severity", "name", "rule", "fix"]))
    return 0
