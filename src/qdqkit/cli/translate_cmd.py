"""``qdqkit translate MODEL [MODEL ...] -o DIR [options]``: the reference translator's options
(``-i MODEL ...`` too)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from qdqkit.cli.args import JsonArgs, OutputArgs, add_groups
from qdqkit.cli.startup import without_blas_threads
from qdqkit.core.errors import QdqkitError
from qdqkit.report.json_output import print_json

# The reference translator's snake_case spellings, with kebab-case aliases, keep working.
OUTPUT = OutputArgs("folder for the outputs (default ./translated)", folder=True,
                    default="./translated", aliases=("--output_dir", "--output-dir"))
JSON = JsonArgs()


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "translate",
        help="Q/DQ model -> Q/DQ-free model + calibration cache + --layerPrecisions (DLA, TRT <= 10)",
        description="Strip every Q/DQ from one or more models and write, per model, "
        "<name>_noqdq.onnx, <name>_precision_config.json, <name>_precision_config_calib.cache and "
        "<name>_precision_config_layer_arg.txt: what TensorRT implicit INT8 (DLA, TensorRT <= 10) "
        "needs. Accepts the options of NVIDIA's qdq_translator.py under the same spellings.",
    )
    # The models are positional as in every other command; -i keeps the reference's spelling.
    parser.add_argument("models", nargs="*", metavar="MODEL", help="Q/DQ ONNX models to translate")
    parser.add_argument(
        "-i", "--input_onnx_models", "--input-onnx-models", nargs="+", default=[],
        metavar="MODEL", help="the same, as the reference translator spells it",
    )
    add_groups(parser, OUTPUT)
    parser.add_argument(
        "--trt_calib_version", "--trt-calib-version", default="8600",
        help="TensorRT version number for the cache header: 8600 for 8.6.0, 100300 for 10.3.0",
    )
    parser.add_argument(
        "--infer_average_pool_scales", "--infer-average-pool-scales", action="store_true",
        help="also propagate scales across AveragePool, GlobalAveragePool and ReduceMean",
    )
    parser.add_argument(
        "--infer_concat_scales", "--infer-concat-scales", action="store_true",
        help="also propagate across Concat (output: largest input scale; every input: output scale; "
             "without it only inputs the Concat alone reads take the output scale)",
    )
    parser.add_argument(
        "--infer_mul_scales", "--infer-mul-scales", action="store_true",
        help="also derive scales across Mul (product rule) and Sigmoid feeding Mul (amax 1)",
    )
    parser.add_argument(
        "--calibration_type", "--calibration-type", choices=("max", "histogram"), default="max",
        type=_calibration_type,
        help="max: report weights whose scales are not per-channel max|w|/127 (default); "
        "histogram: skip that check",
    )
    parser.add_argument(
        "--addtl_ops_to_infer_adjacent_scales", "--addtl-ops-to-infer-adjacent-scales",
        nargs="+", default=[], metavar="OP", help="more op types to copy scales across",
    )
    parser.add_argument(
        "--rename_node_outputs", "--rename-node-outputs", action="store_true",
        help="rename node outputs after their nodes (graph inputs and outputs keep their names)",
    )
    parser.add_argument(
        "--add_unary_ew_scales_for_dla", "--add-unary-ew-scales-for-dla", action="store_true",
        help="give scale 1.0 to an unscaled Conv output feeding an Add whose other input is scaled",
    )
    parser.add_argument("--verbose", action="store_true", help="log each step and every scale")
    add_groups(parser, JSON)
    parser.set_defaults(run=run)


def _calibration_type(text: str) -> str:
    # The reference's maintainers suggested "hist"; pasted commands with it keep working.
    return "histogram" if text.lower().startswith("hist") else text.lower()


def run(args: argparse.Namespace) -> int:
    without_blas_threads()
    from qdqkit.translation import TranslateOptions, translate
    from qdqkit.trt.calib_cache import check_version

    # Only our own messages: onnx-ir logs every tensor at DEBUG.
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    logging.getLogger("qdqkit").setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    options = TranslateOptions(
        trt_calib_version=check_version(args.trt_calib_version),
        infer_average_pool_scales=args.infer_average_pool_scales,
        infer_concat_scales=args.infer_concat_scales,
        infer_mul_scales=args.infer_mul_scales,
        calibration_type=args.calibration_type,
        addtl_ops_to_infer_adjacent_scales=tuple(args.addtl_ops_to_infer_adjacent_scales),
        rename_node_outputs=args.rename_node_outputs,
        add_unary_ew_scales_for_dla=args.add_unary_ew_scales_for_dla,
    )
    models = [*args.models, *args.input_onnx_models]
    if not models:
        raise QdqkitError("no model to translate: give one or more Q/DQ .onnx files "
                          "(qdqkit translate MODEL.onnx -o DIR)")
    stems = [Path(m).stem for m in models]
    clashes = sorted({s for s in stems if stems.count(s) > 1})
    if clashes:
        raise QdqkitError(
            f"several inputs are named '{clashes[0]}'; their outputs would overwrite each other "
            "(rename one, or translate them into different folders)"
        )
    as_json, output = JSON.parse(args), OUTPUT.given(args)
    results = []
    for model in models:
        result = translate(model, output, options)
        results.append(result)
        if not as_json:
            print(render(result, verbose=args.verbose))
    if as_json:
        print_json(results if len(results) > 1 else results[0])
    return 0


def render(result: Any, verbose: bool = False) -> str:
    from qdqkit.translation.writer import layer_precisions
    from qdqkit.trt.layer_args import trtexec_command

    out = result.outputs
    lines = [
        f"translated {result.input} in {result.seconds:.2f} s",
        f"  Q/DQ removed      {result.qdq_removed} (left: {result.qdq_left}); nodes "
        f"{result.nodes_before} -> {result.nodes_after}; folded {result.folded_batchnorms} "
        f"BatchNormalization, {result.folded_pads} Pad",
        f"  INT8 scales       {result.activation_scales} from Q/DQ + "
        f"{result.propagated_scales} propagated"
        + (f" + {len(result.unary_scales)} unary (1.0)" if result.unary_scales else ""),
        f"  FP16 layers       {len(result.fp16_nodes)}"
        + (f": {', '.join(result.fp16_nodes[:8])}" if result.fp16_nodes else "")
        + (" ..." if len(result.fp16_nodes) > 8 else ""),
    ]
    if result.fp32_nodes:
        lines.append(
            f"  FP32 layers       {len(result.fp32_nodes)} (float32 in the mixed-precision source"
            f"): {', '.join(result.fp32_nodes[:8])}" + (" ..." if len(result.fp32_nodes) > 8 else ""))
    if verbose and result.unscaled_tensors:
        lines.append(f"  tensors without a scale: {', '.join(result.unscaled_tensors)}")
    for mismatch in result.weight_scale_mismatches[:5]:
        lines.append(
            f"  note: TensorRT requantizes weight '{mismatch.weight}' of '{mismatch.node}' at "
            f"max|w|/127, which moves its values by up to {mismatch.max_relative_difference:.2%}"
            " of max|w| (use --calibration_type histogram to skip this check)"
        )
    if len(result.weight_scale_mismatches) > 5:
        lines.append(f"  note: {len(result.weight_scale_mismatches) - 5} more such weights")
    for mixed in result.mixed_readers[:5]:
        lines.append(
            f"  note: '{mixed.tensor}' is read through Q/DQ and also directly by "
            f"{', '.join(mixed.readers[:3])}; with one scale per tensor those readers now get "
            "quantized values (check with qdqkit verify)"
        )
    if len(result.mixed_readers) > 5:
        lines.append(f"  note: {len(result.mixed_readers) - 5} more such tensors")
    lines += [f"  warning: {w}" for w in result.warnings]
    hint = result.propagation_hint
    if hint is not None:
        lines.append(
            f"  hint: the {len(result.fp16_nodes)} FP16 layers include "
            f"{', '.join(hint.ops)}; {hint.option} would leave {hint.fp16_after} "
            f"(check the result with qdqkit verify)"
        )
    lines += [
        f"  wrote {out.noqdq_model}",
        f"        {out.precision_config}",
        f"        {out.calib_cache}",
        f"        {out.layer_arg}",
        "  build it on a device with TensorRT <= 10 (add --useDLACore=0 --allowGPUFallback for DLA):",
        "  " + trtexec_command(str(out.noqdq_model), str(out.calib_cache),
                               layer_precisions(result.fp16_nodes, result.fp32_nodes)),
    ]
    return "\n".join(lines)
