"""``qdqkit verify QDQ_MODEL TRANSLATED_DIR [--inputs FILE.npz] [--samples N] [--seed S]``."""

from __future__ import annotations

import argparse
import math
from typing import Any

from qdqkit.cli.args import DataArgs, JsonArgs, add_groups
from qdqkit.report.json_output import json_number, print_json, to_jsonable
from qdqkit.report.text import table

DATA, JSON = DataArgs(samples=4), JsonArgs()


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "verify",
        help="prove numerically that a translation kept the Q/DQ model (SNR, cosine, max error)",
        description="Emulate TensorRT implicit INT8 on the translated model (fake quantization at "
        "every cached scale, weights per channel at max|w|/127) and compare with the Q/DQ model.",
    )
    parser.add_argument("qdq_model", help="the original Q/DQ ONNX model")
    parser.add_argument("translated_dir", help="the folder 'qdqkit translate' wrote")
    add_groups(parser, DATA, JSON)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from qdqkit.verification import verify

    data = DATA.parse(args)
    result = verify(
        args.qdq_model, args.translated_dir, data.inputs, seed=data.seed, samples=data.samples
    )
    if JSON.parse(args):
        # min_snr_db is a property, not a field: added after the fields.
        print_json({**to_jsonable(result), "min_snr_db": json_number(result.min_snr_db)})
    else:
        print(render(result))
    return 0


def render(result: Any) -> str:
    rows = [
        [o.name, "inf" if math.isinf(o.snr_db) else f"{o.snr_db:.1f}", f"{o.cosine:.6f}",
         f"{o.max_abs:.3g}"]
        for o in result.outputs
    ]
    lines = [
        f"Q/DQ model        {result.qdq_model}",
        f"translated        {result.translated_model} + {result.calib_cache}",
        f"inputs            {result.inputs}",
        f"emulated INT8     {result.scaled_tensors} tensors with cached scales, "
        f"{result.quantized_weights} weights quantized per channel at max|w|/127",
        "",
        table(rows, ["output", "SNR dB", "cosine", "max abs err"]),
        "",
    ]
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
    if result.missing_tensors:
        lines.append(f"cache names not in the model: {', '.join(result.missing_tensors[:10])}")
    if not result.config_matches_cache:
        lines.append("warning: the precision config JSON and the calibration cache disagree")
    return "\n".join(lines)
