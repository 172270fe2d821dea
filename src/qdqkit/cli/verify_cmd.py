"""``qdqkit verify QDQ_MODEL TRANSLATED_DIR [--inputs FILE] [--shapes ...] [--min-snr DB]``.

Exit status: 0 when the translation passes (every output at least ``--min-snr`` dB, finite; or,
when outputs fall short, every layer fed the Q/DQ model's own inputs at least ``--min-snr`` dB:
see ``verification.layerwise``), 1 when it fails, 2 when the inputs cannot be verified at all. The
last line says PASS or FAIL.
"""

from __future__ import annotations

import argparse
from typing import Any

from qdqkit.cli.args import DataArgs, JsonArgs, add_groups
from qdqkit.report.json_output import json_number, print_json, to_jsonable
from qdqkit.report.text import decibels, table

DATA, JSON = DataArgs(samples=4, aliases=("--inputs",)), JsonArgs()


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "verify",
        help="prove numerically that a translation kept the Q/DQ model (SNR, pass/fail)",
        description="Emulate TensorRT implicit INT8 on the translated model (fake quantization at "
        "every cached scale, weights requantized per channel at max|w|/127, FP16 rounding in the "
        "FP16 layers) and compare with the Q/DQ model, whose same layers round to FP16 as an "
        "--int8 --fp16 build runs them. When an output's SNR is below --min-snr, each stretch "
        "of layers is also run alone on the Q/DQ model's own values: rounding that the network "
        "amplifies passes, a layer that differs fails (exit 1) and is named.",
    )
    parser.add_argument("qdq_model", help="the original Q/DQ ONNX model")
    parser.add_argument("translated_dir", help="the folder 'qdqkit translate' wrote")
    parser.add_argument("--min-snr", "--min_snr", dest="min_snr", type=float, default=40.0,
                        metavar="DB", help="lowest SNR that passes, in dB (default 40)")
    split = parser.add_mutually_exclusive_group()
    split.add_argument("--split", dest="split", action="store_true", default=None,
                       help="also emulate the sources of loss one at a time (default: only on a failure)")
    split.add_argument("--no-split", dest="split", action="store_false",
                       help="never split the loss into its sources")
    layers = parser.add_mutually_exclusive_group()
    layers.add_argument("--layers", dest="layers", action="store_true", default=None,
                        help="also check layer by layer, each stretch of layers fed the Q/DQ "
                        "model's own values (default: only when an output falls short)")
    layers.add_argument("--no-layers", dest="layers", action="store_false",
                        help="judge by the outputs alone")
    add_groups(parser, DATA, JSON)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from qdqkit.verification import verify

    data = DATA.parse(args)
    request = data.request() if data.source not in (None, "random") else None
    result = verify(
        args.qdq_model, args.translated_dir, request, seed=data.seed,
        samples=data.limit or data.samples, shapes=data.shapes, min_snr_db=args.min_snr,
        split=args.split, layers=args.layers,
    )
    if JSON.parse(args):
        # min_snr_db and verdict are properties, not fields: added after the fields.
        print_json({**to_jsonable(result), "min_snr_db": json_number(result.min_snr_db),
                    "verdict": result.verdict})
    else:
        print(render(result))
    return 0 if result.passed else 1


def render(result: Any) -> str:
    rows = [
        [o.name, decibels(o.snr_db), f"{o.cosine:.6f}", f"{o.max_abs:.3g}"] for o in result.outputs
    ]
    shapes = ", ".join(f"{name} {'x'.join(map(str, dims))}" for name, dims in result.shapes.items())
    lines = [
        f"Q/DQ model        {result.qdq_model}",
        f"translated        {result.translated_model} + {result.calib_cache}",
        f"inputs            {result.inputs}",
        f"shapes            {shapes}",
        f"emulated INT8     {result.scaled_tensors} tensors with cached scales; "
        f"{result.quantized_weights} weights requantized per channel at max|w|/127 "
        f"({result.changed_weights} changed by it); {result.fp16_tensors} tensors rounded to FP16"
        + (" in both models (an --int8 --fp16 build of either runs their readers FP16)"
           if result.fp16_tensors else ""),
        "",
        table(rows, ["output", "SNR dB", "cosine", "max abs err"]),
        "",
    ]
    if result.loss_sources:
        lines.append("where the loss comes from (min SNR as each source is added):")
        for i, step in enumerate(result.loss_sources):
            label = ("+ " if i else "") + step.source
            lines.append(f"  {label:<42} {decibels(step.min_snr_db):>6} dB")
        lines.append("")
    if result.layers is not None:
        check = result.layers
        worst = (f", min {decibels(check.min_snr_db)} dB at '{check.worst}'" if check.worst
                 else "")
        lines.append(
            f"layer by layer (each stretch between quantized tensors fed the Q/DQ model's own "
            f"values, {check.samples} samples): {check.exact} of {check.compared} tensors "
            f"identical{worst}"
        )
        lines.append("")
    if result.unscaled_tensors:
        shown = ", ".join(result.unscaled_tensors[:10])
        more = " ..." if len(result.unscaled_tensors) > 10 else ""
        lines.append(
            f"{len(result.unscaled_tensors)} tensors lost their scale (their readers run FP16 on "
            f"the device): {shown}{more}"
        )
    else:
        lines.append("every float tensor has a scale: the whole network can run INT8")
    if result.unary_tensors:
        lines.append(
            f"{len(result.unary_tensors)} DLA unary (1.0) scales, not emulated: "
            + ", ".join(result.unary_tensors[:10])
        )
    if result.fp16_unmatched:
        lines.append(
            f"{len(result.fp16_unmatched)} tensors rounded to FP16 have no counterpart in the "
            "Q/DQ model, so their rounding counts as loss: " + ", ".join(result.fp16_unmatched[:10])
        )
    if result.missing_tensors:
        lines.append(f"cache names not in the model: {', '.join(result.missing_tensors[:10])}")
    if not result.config_matches_cache:
        lines.append("warning: the precision config JSON and the calibration cache disagree")
    if not result.source_recorded:
        lines.append("warning: the bundle does not record which model it was translated from")
    lines.append(result.verdict)
    return "\n".join(lines)
