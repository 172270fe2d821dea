"""The outputs that must not change when code is reorganized, as SHA-256 digests.

Each case runs one CLI command in-process from the repository root (so paths in the output are the
same on every machine) and digests what it prints, and for ``translate`` the four files it writes.
``python -m tests.golden.cases --write`` records the digests (only when a change in output is meant);
``tests/golden/test_golden.py`` checks them.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DIGESTS = Path(__file__).with_name("digests.json")
FIX = "tests/fixtures"
TREX = f"{FIX}/trex-resnet18-a100"

QDQ_MODELS = (
    f"{FIX}/translate/torch_fq_qat.onnx",
    f"{FIX}/translate/mnist_ort_qdq.onnx",
    f"{FIX}/translate/mnist_ort_qdq_wqdq.onnx",
    f"{FIX}/translate/ultraface_ort_qdq.onnx",
    f"{FIX}/models/polygraphy_qdq_conv.onnx",
    f"{FIX}/models/polygraphy_residual_block.onnx",
)
INSPECT_ONLY = (
    f"{FIX}/translate/mnist.onnx",
    f"{FIX}/translate/mnist_ort_default.onnx",
)
ENGINES = {
    "fp32": f"{TREX}/fp32/resnet.onnx.engine",
    "fp16": f"{TREX}/fp16/resnet.onnx.engine",
    "qat": f"{TREX}/qat/resnet-qat.onnx.engine",
    "qat-residual": f"{TREX}/qat-residual/resnet-qat-residual.onnx.engine",
    "qat-residual-qgap": f"{TREX}/qat-residual-qgap/resnet-qat-residual-qgap.onnx.engine",
}
CONSTRUCTED = (
    f"{TREX}/constructed/resnet-qat-residual.trt11.graph.json",
    f"{TREX}/constructed/resnet-qat-residual.trt11.names-only.graph.json",
    f"{TREX}/constructed/resnet-qat.names-only.graph.json",
)
TRANSLATE_OPTIONS = {
    "default": [],
    "all-flags": ["--infer_concat_scales", "--infer_average_pool_scales", "--infer_mul_scales",
                  "--add_unary_ew_scales_for_dla", "--rename_node_outputs",
                  "--calibration_type", "histogram", "--trt_calib_version", "100300"],
}
RESNET_VARIANTS = ("qat", "qat-residual", "qat-residual-qgap")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _run(argv: list[str]) -> tuple[int, bytes]:
    from qdqkit.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(argv)
    return code, out.getvalue().encode()


def _resnet_models(folder: Path) -> dict[str, str]:
    import onnx

    from qdqkit.examples.resnet import resnet18_qdq

    paths = {}
    for variant in RESNET_VARIANTS:
        path = folder / f"resnet18-{variant}.onnx"
        onnx.save(resnet18_qdq(variant, batch=32), path)
        paths[variant] = os.path.relpath(path, ROOT)
    return paths


def cases(folder: Path) -> Iterator[tuple[str, list[str]]]:
    """(case name, argv) for every command output that is recorded."""
    resnets = _resnet_models(folder)
    lint_models = {Path(m).name: m for m in QDQ_MODELS}
    lint_models.update({f"resnet18-{v}": p for v, p in resnets.items()})
    for label, model in lint_models.items():
        yield f"inspect {label}", ["inspect", model, "--json"]
        for trt in ("8.6", "10", "11"):
            yield f"lint {label} trt{trt}", ["lint", model, "--trt", trt, "--json"]
        yield f"lint {label} dla", ["lint", model, "--target", "dla", "--json"]
    for model in INSPECT_ONLY:
        yield f"inspect {Path(model).name}", ["inspect", model, "--json"]
    for variant, model in resnets.items():
        real = ENGINES[variant] + ".graph.json"
        yield f"lint {variant} --engine", ["lint", model, "--json", "--engine", real]
    for label, stem in ENGINES.items():
        yield f"engine report {label}", ["engine", "report", stem + ".graph.json", "--json"]
        yield f"engine report {label} profile", [
            "engine", "report", stem + ".graph.json", "--profile", stem + ".profile.json", "--json"]
    for path in CONSTRUCTED:
        yield f"engine report {Path(path).name}", ["engine", "report", path, "--json"]
    for a, b in (("qat", "qat-residual"), ("fp16", "qat"), ("qat-residual", "qat-residual-qgap")):
        yield f"engine diff {a} {b}", [
            "engine", "diff", ENGINES[a] + ".graph.json", ENGINES[b] + ".graph.json",
            "--profile-a", ENGINES[a] + ".profile.json",
            "--profile-b", ENGINES[b] + ".profile.json", "--json"]
    yield "engine diff predicted qat", [
        "engine", "diff", resnets["qat"], ENGINES["qat"] + ".graph.json", "--json"]
    for label, model in {**{Path(m).name: m for m in QDQ_MODELS[:5]},
                         "resnet18-qat": resnets["qat"]}.items():
        for option_set, options in TRANSLATE_OPTIONS.items():
            out = folder / f"out-{label}-{option_set}"
            yield f"translate {label} {option_set}", [
                "translate", "-i", model, "-o", os.path.relpath(out, ROOT), *options]


def compute() -> dict[str, str]:
    """Every case's digest (translate: the digest of the four files it writes)."""
    previous = Path.cwd()
    os.chdir(ROOT)
    try:
        # A fixed folder: the model paths that lint and inspect print must be the same every run.
        folder = ROOT / "tests" / "golden" / ".work"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        try:
            digests: dict[str, str] = {}
            for name, argv in cases(folder):
                code, stdout = _run(argv)
                if argv[0] == "translate":
                    out = ROOT / argv[argv.index("-o") + 1]
                    files = sorted(out.iterdir())
                    payload = b"".join(f.name.encode() + b"\0" + f.read_bytes() for f in files)
                    digests[name] = f"{code}:{_digest(payload)}"
                else:
                    digests[name] = f"{code}:{_digest(stdout)}"
            return digests
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    finally:
        os.chdir(previous)


if __name__ == "__main__":
    result = compute()
    if "--write" in sys.argv:
        DIGESTS.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(result)} digests to {DIGESTS}")
    else:
        print(json.dumps(result, indent=1, sort_keys=True))
