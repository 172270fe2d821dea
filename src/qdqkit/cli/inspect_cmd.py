"""``qdqkit inspect MODEL [--json]``."""

from __future__ import annotations

import argparse
from typing import Any

from qdqkit.cli.args import JsonArgs, add_groups
from qdqkit.cli.startup import without_blas_threads
from qdqkit.report.json_output import print_json
from qdqkit.report.text import table

_MAX_LISTED = 8
JSON = JsonArgs()


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "inspect",
        help="show how a model is quantized (Q/DQ style, types, granularity, INT8 share)",
        description="Show a model's opset, producer, Q/DQ style, quantized types, per-tensor vs "
        "per-channel scales, zero-point problems and which weighted ops would run INT8.",
    )
    parser.add_argument("model", help="the ONNX model")
    parser.add_argument("--shapes", action="append", default=[], metavar="SHAPES",
                        help="input shapes for dynamic dimensions when counting MACs, trtexec's "
                        "spelling: name:1x3x640x640,other:1x10 (dynamic ones count as 1 otherwise)")
    add_groups(parser, JSON)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    without_blas_threads()
    from qdqkit.core.shape_spec import parse_shapes
    from qdqkit.inspection import inspect_model

    result = inspect_model(args.model, shapes=parse_shapes(args.shapes) or None)
    if JSON.parse(args):
        print_json(result)
        return 0
    print(render(result))
    return 0


def _counts(title: str, counts: dict[str, int]) -> list[str]:
    if not counts:
        return [f"{title}: none"]
    return [f"{title}:"] + [f"  {name:<36} {n}" for name, n in counts.items()]


def render(result: Any) -> str:
    opsets = ", ".join(f"{d} {v}" for d, v in result.opsets.items())
    lines = [
        f"model      {result.path}",
        f"producer   {result.producer}   (IR {result.ir_version}; opset {opsets})",
        f"nodes      {result.node_count}: "
        + ", ".join(f"{op} {n}" for op, n in list(result.op_counts.items())[:12])
        + (" ..." if len(result.op_counts) > 12 else ""),
        f"Q/DQ       {result.quantize_count} QuantizeLinear, {result.dequantize_count} DequantizeLinear",
    ]
    if result.dynamic_quantization:
        lines.append(
            "dynamic quantization (onnxruntime quantize_dynamic: activation scales computed at "
            "run time; TensorRT cannot build it, translate refuses it): "
            + ", ".join(f"{op} {n}" for op, n in result.dynamic_quantization.items())
        )
    if not result.is_quantized:
        if not result.dynamic_quantization:
            lines.append("this model has no Q/DQ nodes (it is a float model)")
    else:
        lines += _counts("style", result.styles)
        lines += _counts("quantized types", result.quant_types)
        lines += _counts("scales", result.scale_types)
        lines += _counts("granularity", result.granularity)
        if result.zero_point_problems:
            lines.append(f"zero-point problems ({len(result.zero_point_problems)}):")
            shown = result.zero_point_problems[:_MAX_LISTED]
            lines += [f"  {p.node} on '{p.tensor}': {p.detail}" for p in shown]
            if len(result.zero_point_problems) > len(shown):
                rest = len(result.zero_point_problems) - len(shown)
                lines.append(f"  ... and {rest} more (--json lists them all)")
        else:
            lines.append("zero points: all zero (symmetric, as TensorRT requires)")
        if result.unreadable_qdq:
            lines.append("Q/DQ with run-time scales: " + ", ".join(result.unreadable_qdq))
    if result.weighted_ops:
        rows = [
            [
                w.name,
                w.op_type,
                w.runs,
                "DQ" if w.activation_quantized else "float",
                w.weight_style,
                w.weight_granularity,
                f"{w.macs:,}" if w.macs else "?",
            ]
            for w in result.weighted_ops
        ]
        lines.append("")
        lines.append(
            table(
                rows,
                ["weighted op", "type", "runs", "activation", "weight", "weight scale", "MACs"],
            )
        )
        quantized = sum(1 for w in result.weighted_ops if w.quantized)
        share = (
            "unknown (no shapes)"
            if result.int8_mac_share is None
            else f"{result.int8_mac_share:.1%}"
        )
        unsized = [w.name for w in result.weighted_ops if not w.macs]
        if unsized and result.int8_mac_share is not None:
            share += f" of the {len(result.weighted_ops) - len(unsized)} ops of known size"
        lines.append("")
        lines.append(
            f"{quantized}/{len(result.weighted_ops)} weighted ops quantized; INT8 share of MACs: {share}"
        )
        if result.assumed_dims:
            lines.append(
                "MACs assume " + ", ".join(result.assumed_dims)
                + " for dynamic dimensions (set them with --shapes)"
            )
    return "\n".join(lines)
