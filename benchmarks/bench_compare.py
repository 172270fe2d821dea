"""Benchmark ``qdqkit compare`` on a ResNet-50-shaped model against plain float inference.

Targets: on 32 samples, graph-wise <= 2.5x and layer-wise <= 3x the time of plain float inference
of the same samples (qdqkit's runner: onnxruntime CPU, optimizations off, as compare runs it);
peak RSS flat from 8 to 64 samples. onnxruntime's ``qdq_loss_debug`` (every intermediate tensor of
every sample kept) runs on the same models and samples for comparison. Each measurement runs in
its own process so its peak RSS is its own. Run: ``python3 benchmarks/bench_compare.py [--size 112]``.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # bottleneck width, blocks, stride


def build(folder: Path, size: int) -> tuple[Path, Path]:
    from qdqkit.examples.builder import NetBuilder, build_qdq

    b = NetBuilder("resnet50", seed=0)
    x = b.input("x", [1, 3, size, size])
    y = b.conv(x, 3, 64, k=7, stride=2, name="conv1")
    y = b.node("MaxPool", [y], name="pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
    cin = 64
    for stage, (width, blocks, stride) in enumerate(STAGES):
        for block in range(blocks):
            name = f"layer{stage + 1}.{block}"
            s = stride if block == 0 else 1
            z = b.conv(y, cin, width, k=1, name=f"{name}.conv1")
            z = b.conv(z, width, width, k=3, stride=s, name=f"{name}.conv2")
            z = b.conv(z, width, width * 4, k=1, name=f"{name}.conv3", relu=False)
            skip = y if block else b.conv(y, cin, width * 4, k=1, stride=s,
                                          name=f"{name}.downsample", relu=False)
            y = b.node("Relu", [b.node("Add", [z, skip], name=f"{name}.add")],
                       name=f"{name}.relu")
            cin = width * 4
    y = b.node("Flatten", [b.node("GlobalAveragePool", [y], name="gap")], name="flatten")
    b.gemm(y, cin, 1000, name="fc", out="logits")
    b.output("logits", [1, 1000])
    fpath, qpath = folder / "resnet50.onnx", folder / "resnet50_qdq.onnx"
    onnx.save(b.float_model(), fpath)
    onnx.save(build_qdq(b, samples=2), qpath)
    return fpath, qpath


def child(mode: str, folder: Path, samples: int) -> dict[str, float]:
    fpath, qpath = folder / "resnet50.onnx", folder / "resnet50_qdq.onnx"
    data = np.load(folder / "data.npy", mmap_mode="r")[:samples]
    start = time.perf_counter()
    if mode == "float":
        from qdqkit.core.numerics import make_session

        session = make_session(fpath)
        for i in range(samples):
            session.run(None, {"x": np.ascontiguousarray(data[i:i + 1])})
    elif mode == "float-optimized":
        import onnxruntime as ort

        session = ort.InferenceSession(str(fpath), providers=["CPUExecutionProvider"])
        for i in range(samples):
            session.run(None, {"x": np.ascontiguousarray(data[i:i + 1])})
    elif mode in ("graph", "layer", "both", "what-if"):
        from qdqkit.comparison import compare

        np.save(folder / f"data{samples}.npy", np.asarray(data))
        start = time.perf_counter()
        views = ("graph", "layer") if mode in ("both", "what-if") else (mode,)
        compare(fpath, qpath, folder / f"data{samples}.npy", views=views,
                what_if=24 if mode == "what-if" else 0, progress=False)
    elif mode == "ort-qdq-loss-debug":
        from onnxruntime.quantization import CalibrationDataReader
        from onnxruntime.quantization.qdq_loss_debug import (
            collect_activations,
            compute_activation_error,
            create_activation_matching,
            create_weight_matching,
            modify_model_output_intermediate_tensors,
        )

        class Reader(CalibrationDataReader):
            def __init__(self) -> None:
                self.i = 0

            def get_next(self) -> dict[str, np.ndarray] | None:
                if self.i >= samples:
                    return None
                self.i += 1
                return {"x": np.ascontiguousarray(data[self.i - 1:self.i])}

        modify_model_output_intermediate_tensors(str(fpath), str(folder / "f_aug.onnx"))
        modify_model_output_intermediate_tensors(str(qpath), str(folder / "q_aug.onnx"))
        float_acts = collect_activations(str(folder / "f_aug.onnx"), Reader())
        quant_acts = collect_activations(str(folder / "q_aug.onnx"), Reader())
        compute_activation_error(create_activation_matching(quant_acts, float_acts))
        create_weight_matching(str(fpath), str(qpath))
    else:
        raise SystemExit(f"unknown mode {mode}")
    seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return {"seconds": seconds, "rss_mb": rss}


def measure(mode: str, folder: Path, samples: int) -> dict[str, float]:
    env = dict(os.environ)
    root = Path(__file__).resolve().parents[1]
    env["PYTHONPATH"] = os.pathsep.join([str(root / "src"), str(root), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, __file__, "--child", mode, str(folder), str(samples)],
                         capture_output=True, text=True, env=env, check=False)
    if out.returncode:
        raise SystemExit(f"{mode} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    size = int(sys.argv[sys.argv.index("--size") + 1]) if "--size" in sys.argv else 112
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
        folder = Path(tmp)
        build(folder, size)
        rng = np.random.default_rng(0)
        np.save(folder / "data.npy", rng.uniform(-1, 1, (64, 3, size, size)).astype(np.float32))
        nodes = len(onnx.load(folder / "resnet50_qdq.onnx", load_external_data=False).graph.node)
        print(f"ResNet-50-shaped Q/DQ model, input 1x3x{size}x{size}, {nodes} nodes; 32 samples; "
              "each row in its own process")
        rows = {}
        for mode in ("float", "float-optimized", "graph", "layer", "both", "what-if",
                     "ort-qdq-loss-debug"):
            rows[mode] = measure(mode, folder, 32)
        base = rows["float"]["seconds"]
        print(f"{'step':<44}{'seconds':>9}{'x float':>9}{'peak RSS MB':>13}")
        labels = {
            "float": "baseline: float inference (opt. off)",
            "float-optimized": "float inference, onnxruntime optimized",
            "graph": "compare, graph-wise only (limit 2.5x)",
            "layer": "compare, layer-wise only (limit 3x)",
            "both": "compare, both views",
            "what-if": "compare, both views + what-if (24 nodes)",
            "ort-qdq-loss-debug": "onnxruntime qdq_loss_debug (both errors)",
        }
        for mode, row in rows.items():
            print(f"{labels[mode]:<44}{row['seconds']:>9.2f}{row['seconds'] / base:>8.2f}x"
                  f"{row['rss_mb']:>13.0f}")
        small, large = measure("both", folder, 8), measure("both", folder, 64)
        growth = large["rss_mb"] / small["rss_mb"]
        print(f"peak RSS, both views: 8 samples {small['rss_mb']:.0f} MB, 64 samples "
              f"{large['rss_mb']:.0f} MB ({growth:.2f}x; limit 1.10x)")
        debug8 = measure("ort-qdq-loss-debug", folder, 8)
        print(f"qdq_loss_debug peak RSS: 8 samples {debug8['rss_mb']:.0f} MB, 32 samples "
              f"{rows['ort-qdq-loss-debug']['rss_mb']:.0f} MB")
        failed = []
        if rows["graph"]["seconds"] > 2.5 * base:
            failed.append("graph-wise over 2.5x")
        if rows["layer"]["seconds"] > 3.0 * base:
            failed.append("layer-wise over 3x")
        if growth > 1.10:
            failed.append("peak RSS grows with samples")
        print("all limits met" if not failed else "NOT MET: " + ", ".join(failed))
        return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]))))
        sys.exit(0)
    sys.exit(main())
