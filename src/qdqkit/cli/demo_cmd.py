"""``qdqkit demo [--dir DIR]``: the main job end to end on a built-in QAT-style model."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="build a small QAT-style model, then inspect, lint, translate and verify it",
        description="Build a small QAT-style ResNet (TensorRT pytorch-quantization style) in a "
        "temporary folder (or --dir), then run inspect, lint, translate and verify on it and say "
        "where the outputs are and what they show.",
    )
    parser.add_argument("--dir", help="folder to work in (default: a new temporary folder)")
    parser.add_argument(
        "--style", choices=("trt", "modelopt"), default="trt",
        help="Q/DQ style of the built model: TensorRT QAT (default) or ModelOpt opset-19 fp16",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import onnx

    from qdqkit.cli.inspect_cmd import render as render_inspect
    from qdqkit.cli.lint_cmd import render as render_lint
    from qdqkit.cli.translate_cmd import render as render_translate
    from qdqkit.cli.verify_cmd import render as render_verify
    from qdqkit.examples.builder import demo_network
    from qdqkit.inspection import inspect_model
    from qdqkit.linting import lint
    from qdqkit.translation import translate
    from qdqkit.trt.layer_args import trtexec_command
    from qdqkit.verification import verify

    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="qdqkit-demo-"))
    folder.mkdir(parents=True, exist_ok=True)
    model_path = folder / f"demo_{args.style}_qat.onnx"
    print(f"== building a QAT-style ResNet ({args.style} style) -> {model_path}")
    onnx.save(demo_network(args.style), model_path)
    print()
    print(f"== qdqkit inspect {model_path}")
    print(render_inspect(inspect_model(model_path)))
    print()
    print(f"== qdqkit lint {model_path}   (the engine TensorRT 8.6 would build, and what slows it)")
    print(render_lint(lint(model_path)))
    print()
    out_dir = folder / "translated"
    print(f"== qdqkit translate -i {model_path} -o {out_dir}")
    result = translate(model_path, out_dir)
    print(render_translate(result))
    print()
    print(f"== qdqkit verify {model_path} {out_dir}")
    check = verify(model_path, out_dir)
    print(render_verify(check))
    print()
    layer_arg = result.outputs.layer_arg.read_text(encoding="utf-8")
    print("== what it shows")
    how_close = ("exactly (the outputs are equal bit for bit, in both models with those layers "
                 "in FP16)" if check.min_snr_db == float("inf")
                 else f"at {check.min_snr_db:.1f} dB SNR (>= 40 dB means the translation kept the "
                 "model)")
    print(
        f"The Q/DQ-free model keeps {result.activation_scales + result.propagated_scales} INT8 "
        f"scales in the cache; {len(result.fp16_nodes)} layers are pinned to FP16 because their "
        f"inputs have no scale. Emulating TensorRT implicit INT8 reproduces the Q/DQ model "
        f"{how_close}."
    )
    print()
    print("== build it on a device with TensorRT <= 10 (add --useDLACore=0 --allowGPUFallback for DLA):")
    print(trtexec_command(str(result.outputs.noqdq_model), str(result.outputs.calib_cache), layer_arg))
    print()
    print(f"everything is in {folder}")
    return 0
