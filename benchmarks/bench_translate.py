"""Speed, memory and determinism of ``qdqkit translate`` (not part of the unit tests).

    python3 benchmarks/bench_translate.py [--quick]

Builds pytorch-quantization-style residual Q/DQ stacks (activation scales in Constant nodes, float
weights -> Q -> DQ per channel, Conv -> BatchNormalization -> Relu, residual Add): deep ones
(16 channels, 256 and 1024 blocks: about 5.4k and 21.5k nodes) for time per node, and a wide one
(512 channels, 16 blocks: about 300 MB of weights) for peak memory. Every figure is printed next to
a baseline measured in the same run: plain ``onnx.load`` + ``onnx.save`` of the same file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CHILD = r"""
import json, resource, sys, time
mode, model, out = sys.argv[1:4]
start = time.perf_counter()
import onnx
from qdqkit.translation import translate
imported = time.perf_counter()
if mode == "baseline":
    onnx.save(onnx.load(model), out + "/baseline.onnx")
else:
    translate(model, out)
done = time.perf_counter()
print(json.dumps({"seconds": done - imported, "import_seconds": imported - start,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""
# Built in a child too: on Linux a child's ru_maxrss starts from its parent's RSS at fork time,
# so the parent must stay small for the memory figure to mean anything.
BUILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import onnx
from bench_translate import qat_stack
onnx.save(qat_stack(int(sys.argv[2]), int(sys.argv[3])), sys.argv[4])
"""


def qat_stack(blocks: int, width: int, seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []

    def act_qdq(x: str, tag: str, amax: float) -> str:
        scale = numpy_helper.from_array(np.array(amax / 127, np.float32))
        zero = numpy_helper.from_array(np.array(0, np.int8))
        nodes.append(helper.make_node("Constant", [], [f"{tag}_s"], name=f"{tag}_s", value=scale))
        nodes.append(helper.make_node("Constant", [], [f"{tag}_z"], name=f"{tag}_z", value=zero))
        nodes.append(helper.make_node("QuantizeLinear", [x, f"{tag}_s", f"{tag}_z"], [f"{tag}_q"],
                                      name=f"{tag}_Q"))
        nodes.append(helper.make_node("DequantizeLinear", [f"{tag}_q", f"{tag}_s", f"{tag}_z"],
                                      [f"{tag}_dq"], name=f"{tag}_DQ"))
        return f"{tag}_dq"

    def conv_bn(x: str, tag: str, relu: bool) -> str:
        w = rng.normal(0, 0.05, size=(width, width, 3, 3)).astype(np.float32)
        ws = (np.abs(w.reshape(width, -1)).max(axis=1) / 127).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"{tag}.weight"))
        inits.append(numpy_helper.from_array(ws, f"{tag}.wscale"))
        zero = numpy_helper.from_array(np.zeros(width, np.int8))
        nodes.append(helper.make_node("Constant", [], [f"{tag}.wzero"], name=f"{tag}.wzero",
                                      value=zero))
        for name, values in (("gamma", rng.uniform(0.5, 1.5, width)), ("beta", np.zeros(width)),
                             ("mean", np.zeros(width)), ("var", np.ones(width))):
            inits.append(numpy_helper.from_array(values.astype(np.float32), f"{tag}.{name}"))
        wq = [f"{tag}.weight", f"{tag}.wscale", f"{tag}.wzero"]
        nodes.append(helper.make_node("QuantizeLinear", wq, [f"{tag}_wq"], name=f"{tag}_wQ", axis=0))
        nodes.append(helper.make_node("DequantizeLinear", [f"{tag}_wq", *wq[1:]], [f"{tag}_wdq"],
                                      name=f"{tag}_wDQ", axis=0))
        nodes.append(helper.make_node("Conv", [x, f"{tag}_wdq"], [f"{tag}_conv"], name=f"{tag}",
                                      pads=[1, 1, 1, 1]))
        bn_in = [f"{tag}_conv", f"{tag}.gamma", f"{tag}.beta", f"{tag}.mean", f"{tag}.var"]
        nodes.append(helper.make_node("BatchNormalization", bn_in, [f"{tag}_bn"], name=f"{tag}_bn"))
        if not relu:
            return f"{tag}_bn"
        nodes.append(helper.make_node("Relu", [f"{tag}_bn"], [f"{tag}_relu"], name=f"{tag}_relu"))
        return f"{tag}_relu"

    x = "input"
    for b in range(blocks):
        y = conv_bn(act_qdq(x, f"b{b}.in", 4.0), f"b{b}.c1", relu=True)
        y = conv_bn(act_qdq(y, f"b{b}.mid", 4.0), f"b{b}.c2", relu=False)
        nodes.append(helper.make_node("Add", [y, x], [f"b{b}_add"], name=f"b{b}_add"))
        nodes.append(helper.make_node("Relu", [f"b{b}_add"], [f"b{b}_out"], name=f"b{b}_out"))
        x = f"b{b}_out"
    graph = helper.make_graph(
        nodes, "qat_stack",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, width, 8, 8])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, width, 8, 8])], inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def measure(mode: str, model: Path, out: Path) -> dict[str, float]:
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-c", CHILD, mode, str(model), str(out)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(folder.glob("*")):
        h.update(path.name.encode() + path.read_bytes())
    return h.hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="skip the 300 MB model")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        print("speed (deep ResNet-style Q/DQ stacks, 16 channels)")
        per_node = {}
        for blocks in (256, 1024):
            model = qat_stack(blocks, 16)
            path = tmp / f"deep_{blocks}.onnx"
            onnx.save(model, path)
            nodes = len(model.graph.node)
            qdq = sum(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in model.graph.node)
            base = measure("baseline", path, tmp / f"base_{blocks}")
            runs = [measure("translate", path, tmp / f"out_{blocks}_{i}") for i in range(3)]
            best = min(r["seconds"] for r in runs)
            per_node[blocks] = best / nodes
            print(f"  {nodes:6d} nodes ({qdq} Q/DQ, {path.stat().st_size / 1e6:.0f} MB): "
                  f"translate {best:.2f} s (best of 3: load, translate, write 4 files) vs onnx "
                  f"load+save {base['seconds']:.2f} s = {best / base['seconds']:.2f}x; "
                  f"{per_node[blocks] * 1e6:.1f} us/node; imports {runs[0]['import_seconds']:.2f} s")
            same = len({digest(tmp / f"out_{blocks}_{i}") for i in range(3)}) == 1
            print(f"         3 runs byte-identical: {same}")
        print(f"  time per node at 21.5k / at 5.4k nodes: {per_node[1024] / per_node[256]:.2f}x "
              "(target <= 1.5x)")
        if args.quick:
            return
        print("memory (wide Q/DQ stack, 512 channels, 16 blocks)")
        path = tmp / "wide.onnx"
        subprocess.run([sys.executable, "-c", BUILD, str(Path(__file__).parent), "16", "512",
                        str(path)], check=True)
        size_mb = path.stat().st_size / 2**20
        base = measure("baseline", path, tmp / "base_wide")
        result = measure("translate", path, tmp / "out_wide")
        budget = 1.5 * size_mb + 200
        print(f"  file {size_mb:.0f} MB: translate peak RSS {result['peak_mb']:.0f} MB in "
              f"{result['seconds']:.1f} s; onnx load+save peak {base['peak_mb']:.0f} MB "
              f"({result['peak_mb'] / base['peak_mb']:.2f}x); budget 1.5 x file + 200 MB = "
              f"{budget:.0f} MB: {'OK' if result['peak_mb'] <= budget else 'OVER'}")


if __name__ == "__main__":
    main()
