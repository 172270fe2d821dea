"""``qdqkit compare FLOAT.onnx QUANT.onnx [--data DATA] [-o report.html] [--fallback FILE] [--json]``.

The data options are the shared ones (``--data``, ``--preprocess``, ``--shapes``, ``--batch``,
``--limit``, ...); its own flags are ``--views``, ``--what-if``, ``--what-if-samples``,
``--fallback``, ``--top``, ``--class-axis``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from qdqkit.cli.args import DataArgs, JsonArgs, OutputArgs, TrtArgs, add_groups
from qdqkit.report.json_output import print_json
from qdqkit.report.text import decibels, table

DATA, JSON, TRT = DataArgs(samples=8), JsonArgs(), TrtArgs(" the engine costs", from_model=True)
OUTPUT = OutputArgs("write the report as one self-contained HTML file")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "compare",
        help="find where a Q/DQ model's error comes from: graph-wise, layer-wise and what-if "
        "FP16 error per quantized node",
        description="Compare a Q/DQ model with the float model it was made from, tensor by "
        "tensor, on CPU. Graph-wise: the Q/DQ model run end to end; layer-wise: each quantized "
        "node fed the float model's inputs through its own Q/DQ; what-if: the output SNR gained "
        "if a node ran FP16, and its predicted engine cost.",
    )
    parser.add_argument("float_model", help="the float ONNX model")
    parser.add_argument("quant_model", help="the Q/DQ ONNX model made from it")
    parser.add_argument("--views", default="graph,layer", metavar="V",
                        help="graph, layer or graph,layer (default)")
    parser.add_argument("--what-if", type=int, default=24, metavar="N",
                        help="what-if FP16 runs for the N nodes worst in either view (default "
                        "24; 0: none)")
    parser.add_argument("--what-if-samples", type=int, default=16, metavar="N",
                        help="samples the what-if runs use (default 16)")
    parser.add_argument("--fallback", metavar="FILE", help="write the ranked fallback list "
                        "(one node name per line, # comments) for quantize --exclude-from / fix")
    parser.add_argument("--top", type=int, default=10, metavar="N",
                        help="rows per ranking in the text report (default 10)")
    parser.add_argument("--class-axis", type=int, default=-1, metavar="AXIS",
                        help="the outputs' class axis for argmax/top-5 agreement (default -1)")
    add_groups(parser, DATA, TRT, OUTPUT, JSON)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from qdqkit.comparison import compare
    from qdqkit.comparison.html import check_html_output, write_html
    from qdqkit.comparison.whatif import write_fallback

    data = DATA.parse(args)
    views = [v.strip() for v in str(args.views).split(",") if v.strip()]
    inputs = (Path(args.float_model), Path(args.quant_model))
    output = OUTPUT.parse(args)
    if output:
        check_html_output(Path(output))  # a wrong name is refused before minutes of runs
    result = compare(
        args.float_model, args.quant_model, data.request_or_random(), samples=data.limit or data.samples,
        batch=data.batch, seed=data.seed, views=views, what_if=max(0, args.what_if),
        what_if_samples=max(1, args.what_if_samples), class_axis=args.class_axis,
        trt=TRT.given(args),
    )
    written = []
    if output:
        written.append(write_html(result, Path(output), protected=inputs))
    if args.fallback:
        written.append(write_fallback(result, args.fallback, protected=inputs))
    if JSON.parse(args):
        print_json(result)
    else:
        print(render(result, args.top))
        for path in written:
            print(f"wrote {path}")
    return 0


def render(result: Any, top: int = 10) -> str:
    lines = [
        f"float      {result.float_model}",
        f"quantized  {result.quant_model}",
        f"data       {result.samples} samples: {result.data}",
        f"engine     TensorRT {result.trt}"
        + (" (the version qdqkit quantize built the model for)" if result.from_model else ""),
        "",
        table([[o.name, decibels(o.error.snr_db), f"{o.error.cosine:.6f}", f"{o.error.max_abs:.3g}",
                "-" if o.argmax_agreement is None else f"{o.argmax_agreement:.1%}",
                "-" if o.topk_agreement is None else f"{o.topk_agreement:.1%}"]
               for o in result.outputs],
              ["output", "SNR dB", "cosine", "max abs err", "argmax agree", "top-5 agree"]),
    ]
    if result.user_metric is not None:
        lines.append(f"your metric  {result.user_metric:.6g}")
    nodes = {n.name: n for n in result.nodes}
    if result.graph_ranking:
        rows = [[n.name, n.op_type, decibels(n.added_snr_db), decibels(n.arrival_snr_db),
                 decibels(n.graph.snr_db if n.graph else None), n.engine_precision or "-"]
                for n in (nodes[name] for name in result.graph_ranking[:top])]
        lines += ["", "graph-wise: noise each node adds, worst first (SNR of the added noise)",
                  table(rows, ["node", "op", "added SNR dB", "arriving dB", "output dB",
                               "engine"])]
    if result.layer_ranking:
        tensors = {t.name: t for t in result.tensors}
        rows = []
        for n in (nodes[name] for name in result.layer_ranking[:top]):
            clipped = max((tensors[t].clipped_fraction or 0.0 for t in n.quantized_inputs
                           if t in tensors), default=None)
            weight = min((w.min_channel_snr_db for w in n.weights
                          if w.min_channel_snr_db is not None), default=None)
            rows.append([n.name, n.op_type, decibels(n.local.snr_db if n.local else None),
                         "-" if clipped is None else f"{clipped:.2%}", decibels(weight)])
        lines += ["", "layer-wise: each node alone on float inputs, worst first",
                  table(rows, ["node", "op", "layer SNR dB", "input clipped",
                               "weight SNR dB (worst ch.)"])]
    if result.fallback:
        rows = []
        for n in (nodes[name] for name in result.fallback[:top]):
            what = n.what_if
            rows.append([n.name, f"{what.snr_gain_db:+.2f}", decibels(what.output_snr_db),
                         "-" if what.reformats_added is None else f"{what.reformats_added:+d}",
                         "-" if what.int8_macs_lost is None else f"{what.int8_macs_lost:,}"])
        lines += ["", f"what-if FP16, best first (output SNR now {decibels(result.output_snr_db)} dB)",
                  table(rows, ["node", "gain dB", "output SNR dB", "Reformats",
                               "INT8 MACs lost"])]
    if result.fallback_steps:
        rows = [[f"first {step.nodes}", f"{step.snr_gain_db:+.2f}", decibels(step.output_snr_db),
                 "-" if step.reformats_added is None else f"{step.reformats_added:+d}",
                 "-" if step.int8_macs_lost is None else f"{step.int8_macs_lost:,}"]
                for step in result.fallback_steps]
        lines += ["", "what-if FP16 together: the list's first nodes at once (gains do not add up)",
                  table(rows, ["nodes", "gain dB", "output SNR dB", "Reformats",
                               "INT8 MACs lost"])]
    if result.unpaired:
        lines += ["", f"{len(result.unpaired)} quantized nodes without a float counterpart: "
                  + ", ".join(result.unpaired[:10])]
    lines += [""] + [f"note: {n}" for n in result.notes]
    return "\n".join(lines).rstrip()
