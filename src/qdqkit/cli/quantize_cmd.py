"""``qdqkit quantize MODEL -o OUT.onnx --calib DATA [options]``."""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from qdqkit.cli.args import DataArgs, JsonArgs, OutputArgs, TargetArgs, TrtArgs, add_groups
from qdqkit.core.errors import QdqkitError
from qdqkit.report.json_output import print_json
from qdqkit.report.text import macs, table

TRT, TARGET, JSON = TrtArgs(" and build", default="11", dla_default="10"), TargetArgs(), JsonArgs()
DATA = DataArgs.calibration()
OUTPUT = OutputArgs("the quantized model (.onnx); OUT.quant.json is written beside it",
                    required=True)
_SHOWN = 12


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "quantize",
        help="quantize a float model to a TensorRT-ready INT8 Q/DQ model",
        description="Place Q/DQ where TensorRT fuses them, calibrate in one streaming pass and "
        "write OUT.onnx and OUT.quant.json (per tensor scale and range, per weighted op whether "
        "it is quantized and why not). Exit code 1 when the output has lint errors, 2 on bad "
        "input.",
    )
    parser.add_argument("model", help="the float ONNX model")
    add_groups(parser, OUTPUT, DATA)
    options = parser.add_argument_group("quantization")
    options.add_argument("--method", default="auto",
                         choices=("max", "percentile", "entropy", "mse", "auto"),
                         help="activation calibration (default auto: per tensor the method with "
                         "the least quantization error, then per scale group whatever gives the "
                         "network's output the least error)")
    options.add_argument("--percentile", type=float, default=99.99,
                         help="percentile of |x| for --method percentile (default 99.99)")
    options.add_argument("--high-precision", default="fp16", choices=("fp16", "fp32"),
                         help="type of the layers left out of INT8 (default fp16; nodes that "
                         "would overflow stay fp32 and are listed): TensorRT 11 takes it from "
                         "the model, TensorRT <= 10 from the build line (--fp16, with "
                         "--layerPrecisions pins)")
    options.add_argument("--exclude", action="append", default=[], metavar="NAME",
                         help="keep float: a node name, a glob of names or an op type "
                         "(repeatable, or comma-separated)")
    options.add_argument("--exclude-from", action="append", default=[], metavar="FILE",
                         help="keep float every node listed in FILE: one name, glob or op type "
                         "per line, '#' starts a comment (the list 'compare --fallback' writes)")
    options.add_argument("--keep-unpaid", action="store_true",
                         help="keep INT8 regions the cost model predicts slower than FP16 (their "
                              "standalone Q/DQ Reformats cost more than INT8 saves)")
    options.add_argument("--per-tensor-weights", action="store_true",
                         help="one scale per weight instead of one per output channel")
    options.add_argument("--smooth-quant", nargs="?", type=float, const=0.5, default=None,
                         metavar="ALPHA",
                         help="MatMul models: move activation outliers of LayerNorm/Linear "
                         "outputs into the next weights, exactly (alpha default 0.5)")
    options.add_argument("--no-equalize", dest="equalize", action="store_false",
                         help="do not even out the channel ranges depthwise convolutions read "
                         "(by default, exact power-of-two factors TensorRT fuses into the "
                         "layer before give narrow channels more INT8 levels)")
    add_groups(parser, TRT, TARGET, JSON)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from qdqkit.core.node_list import read_node_lists
    from qdqkit.quantization import quantize

    data = DATA.parse(args)
    if data.source is None:
        raise QdqkitError(
            "no calibration data: give --calib with a .npy, a .npz, a folder of them or of "
            "images, or --calib random (scales meaningless for accuracy)"
        )
    exclude = [p.strip() for item in args.exclude for p in item.split(",") if p.strip()]
    exclude += read_node_lists(args.exclude_from)
    as_json = JSON.parse(args)
    result = quantize(
        args.model, data.source, output=OUTPUT.given(args), method=args.method,
        percentile=args.percentile, trt=TRT.parse(args, TARGET.parse(args)), target=TARGET.parse(args),
        high_precision=args.high_precision, exclude=exclude,
        per_tensor_weights=args.per_tensor_weights, keep_unpaid=args.keep_unpaid,
        batch=data.batch, calib_limit=data.sample_limit,
        shapes=data.shapes, preprocess=data.preprocess_spec(),
        seed=data.seed, progress=None if not as_json else False,
        smooth_quant=args.smooth_quant, equalize=args.equalize,
    )
    if as_json:
        print_json(result)
    else:
        print(render(result))
    return result.exit_code


def _by_output_line(chosen: dict[str, Any] | None) -> list[str]:
    """How ``auto`` judged its choice on the output, next to each uniform method."""
    if not chosen:
        return []
    gain = chosen["gain_db"]

    def db(value: float | None) -> str:
        if value is None:
            return "exact"
        return f"{abs(value):.1f} dB {'below' if value >= 0 else 'above'}"

    uniform = ", ".join(f"{m} {db(v)}" for m, v in gain.items() if m not in ("chosen",
                                                                             "least-error"))
    lines = [f"  by output     output error {db(gain.get('chosen'))} the per-tensor picks' on "
             f"{chosen['samples']} calibration samples ({chosen['runs']} runs; every group at "
             f"{uniform})"]
    measured = {name: v for name, v in (chosen.get("output_snr_db") or {}).items()
                if v is not None}
    if measured:
        worst = min(measured, key=lambda name: measured[name])
        shown = "exact" if measured[worst] == float("inf") else f"{measured[worst]:.1f} dB"
        where = f" ('{worst}', the worst of {len(measured)})" if len(measured) > 1 else ""
        lines.append(f"  output SNR    {shown}{where} against the float model on those samples; "
                     "`qdqkit compare` ranks the layers that lose it")
    return lines


def _judged_at(result: Any) -> str:
    """At which input shapes the engine was predicted, when the model leaves them open."""
    shapes = result.judged_shapes
    if not shapes:
        return ""
    spec = ",".join(f"{name}:{'x'.join(str(d) for d in dims)}" for name, dims in shapes.items()
                    if dims)
    whose = ("--shapes" if result.options.get("shapes")
             else "the first calibration batch; --shapes gives the deployed ones")
    return f" at {spec} ({whose})"


def render(result: Any) -> str:
    cal = result.calibration
    picked = Counter(t.method for t in result.tensors)
    clipped = sum(1 for t in result.tensors if t.clipped_fraction > 0.01)
    methods = ", ".join(f"{m} {n}" for m, n in picked.most_common())
    weighted = result.weighted
    total = result.engine.total_macs or sum(w.macs or 0 for w in weighted)
    share = result.int8_mac_share
    engine = result.engine
    by_precision = ", ".join(f"{p} {n}" for p, n in engine.layers_by_precision.items())
    warned = ", ".join(f"{c} {n}" for c, n in result.lint_warnings.items()) or "none"
    lines = [
        f"quantized {result.source} -> {result.output} in {result.seconds:.1f} s "
        f"(report {result.report})",
        f"  calibration   {cal['samples']} samples in {cal['batches']} batches from "
        f"{cal['data']}",
        f"  scales        {len(result.tensors)} tensors; method {result.options['method']}"
        f"{f' (picked: {methods})' if methods else ''}; {clipped} clip more than 1% of values",
        *_by_output_line(cal.get("auto_by_output")),
        f"  INT8 MACs     {'unknown' if share is None else f'{share:.1%}'} of {macs(total)} "
        f"({sum(1 for w in weighted if w.quantized)}/{len(weighted)} weighted ops"
        f"{engine.mac_caveat()})" if weighted else
        "  INT8 MACs     none: no weighted op in the main graph",
        f"  engine        TensorRT {result.options['trt']} {result.options['target']}"
        f"{_judged_at(result)}: "
        f"{by_precision or 'no layers'}; {engine.reformats} Reformats "
        f"({engine.qdq_reformats} from Q/DQ)",
        f"  lint          {result.lint_errors} errors; warnings: {warned}",
    ]
    floats = [[w.node, w.op_type, w.reason] for w in weighted if not w.quantized]
    if floats:
        lines += ["", "weighted ops left float:",
                  table(floats[:_SHOWN], ["node", "op", "why"])]
        if len(floats) > _SHOWN:
            lines.append(f"  ... and {len(floats) - _SHOWN} more (in the report)")
    plugins = list(result.float_nodes.items())
    if plugins:
        lines += ["", f"{len(plugins)} nodes left float and untouched:"]
        lines += [f"  {name}: {why}" for name, why in plugins[:_SHOWN]]
    if result.fp32_nodes:
        where = ("in the FP16 remainder" if result.options["trt"] == "11"
                 else "in the --fp16 build (pinned on the build line)")
        lines += ["", f"{len(result.fp32_nodes)} nodes kept FP32 {where}:"]
        lines += [f"  {name}: {why}" for name, why in list(result.fp32_nodes.items())[:_SHOWN]]
    smoothed = result.calibration.get("smoothed") or []
    if smoothed:
        lines += ["", f"SmoothQuant (alpha {result.options['smooth_quant']}): "
                  f"{len(smoothed)} tensors rescaled into their readers' weights"]
    equalized = result.calibration.get("equalized") or []
    if equalized:
        scaled = sum(int(e["channels_scaled"]) for e in equalized)
        channels = sum(int(e["channels"]) for e in equalized)
        top = max(float(e["largest_factor"]) for e in equalized)
        lines += ["", f"depthwise inputs equalized: {len(equalized)} tensors, {scaled} of "
                  f"{channels} channels scaled up (factors up to {top:g}) into more INT8 levels; "
                  "--no-equalize to leave them"]
    held = result.calibration.get("non_finite_float_tensors") or []
    if held:
        lines += ["", f"{len(held)} float tensors hold infinities or a NaN the model replaces, by "
                  f"design (e.g. '{held[0]}': an attention mask of -inf, a log of 0, a softmax "
                  "over a row masked whole): they stay float, judged for FP16 by their finite "
                  "values"]
    for warning in result.warnings:
        lines += ["", f"warning: {warning}"]
    lines += ["", "build it:", f"  {result.trtexec}"]
    return "\n".join(lines)
