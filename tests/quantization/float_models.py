"""Float models in the shapes real networks take, for placement and pipeline tests.

ResNet (BN, residual Adds, a downsample shortcut, GlobalAveragePool, FC), YOLO (Focus Slices,
Conv-BN-SiLU, C2f-style Split/Concat with Bottleneck Adds, SPPF MaxPools, Resize, a Detect head with
DFL softmax-expectation decode), MobileNetV3 (depthwise, HardSwish, squeeze-excite) and a
transformer block (LayerNorm, attention MatMuls, Softmax, GELU), and an SVTR-like text recognizer
mixing both. Weights are seeded random, scaled
so activations keep a sane range through the depth.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qdqkit.examples.graph import GraphBuilder


def _cbr(g: GraphBuilder, x: str, cin: int, cout: int, k: int = 3, stride: int = 1,
         act: str = "Relu", group: int = 1) -> str:
    std = float(np.sqrt(2.0 / (cin // group * k * k)))
    y = g.conv(x, cin, cout, k, stride=stride, group=group, weight="float", std=std)
    y = g.bn(y, cout, random=True)
    if act == "Relu":
        return g.node("Relu", [y])
    if act == "SiLU":
        return g.node("Mul", [y, g.node("Sigmoid", [y])])
    if act == "HardSwish":
        return g.node("HardSwish", [y])
    if act == "HardSwishMath":  # x * Clip(x + 3, 0, 6) / 6, as Paddle and older exporters write it
        three, zero, six = (g.const(np.array(v, np.float32)) for v in (3.0, 0.0, 6.0))
        gate = g.node("Clip", [g.node("Add", [y, three]), zero, six])
        return g.node("Div", [g.node("Mul", [y, gate]), six])
    return y


def resnet(batch: int | str = 1, size: int = 32) -> GraphBuilder:
    g = GraphBuilder("resnet_like", seed=1)
    x = g.input("images", [batch, 3, size, size])
    x = _cbr(g, x, 3, 32, stride=2)
    x = g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    for cin, cout, stride in ((32, 32, 1), (32, 64, 2)):
        y = _cbr(g, x, cin, cout, stride=stride)
        y = g.bn(g.conv(y, cout, cout, weight="float", std=float(np.sqrt(1.0 / (cout * 9)))),
                 cout, random=True)
        skip = x if stride == 1 else g.bn(g.conv(x, cin, cout, 1, stride=stride, weight="float",
                                                  std=float(np.sqrt(1.0 / cin))), cout)
        x = g.node("Relu", [g.node("Add", [y, skip])])
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x])])
    g.gemm(x, 64, 10, weight="float", std=0.1, out="logits")
    g.output("logits", [batch, 10])
    return g


def residual_chain(size: int = 32) -> GraphBuilder:
    """Residual blocks without a ReLU after the Add (an EfficientNet-style stage), the last one
    read only by float math: a Transpose into a Tanh, as a CNN stage feeds an LSTM."""
    g = GraphBuilder("residual_chain", seed=9)
    x = _cbr(g, g.input("x", [1, 16, size, size]), 16, 128, act="SiLU")
    x = g.bn(g.conv(x, 128, 128, 1, weight="float", std=0.1), 128, random=True)
    for _ in range(3):
        y = _cbr(g, x, 128, 128, act="SiLU")
        y = g.bn(g.conv(y, 128, 128, weight="float", std=0.02), 128, random=True)
        x = g.node("Add", [x, y])
    g.node("Tanh", [g.node("Transpose", [x], perm=[0, 2, 3, 1])], out="y")
    g.output("y", [1, size, size, 128])
    return g


def yolo(size: int = 64) -> GraphBuilder:
    g = GraphBuilder("yolo_like", seed=2)
    x = g.input("images", [1, 3, size, size])
    starts = [(0, 0), (1, 0), (0, 1), (1, 1)]
    slices = [g.node("Slice", [x, g.const(np.array([h, w], np.int64)),
                                g.const(np.array([size, size], np.int64)),
                                g.const(np.array([2, 3], np.int64)),
                                g.const(np.array([2, 2], np.int64))]) for h, w in starts]
    x = g.node("Concat", slices, axis=1)
    x = _cbr(g, x, 12, 32, act="SiLU")
    p3 = _cbr(g, x, 32, 64, stride=2, act="SiLU")
    # C2f: split in two, a bottleneck with a residual Add on one half, concat everything
    a, b = (g.fresh("split_a"), g.fresh("split_b"))
    g.nodes.append(__import__("onnx").helper.make_node(
        "Split", [p3, g.const(np.array([32, 32], np.int64))], [a, b], axis=1, name="c2f.split"))
    m = _cbr(g, _cbr(g, b, 32, 32, act="SiLU"), 32, 32, act="SiLU")
    m = g.node("Add", [b, m])
    c2f = _cbr(g, g.node("Concat", [a, b, m], axis=1), 96, 64, 1, act="SiLU")
    # SPPF
    s = _cbr(g, c2f, 64, 32, 1, act="SiLU")
    pools = [s]
    for _ in range(3):
        pools.append(g.node("MaxPool", [pools[-1]], kernel_shape=[5, 5], pads=[2, 2, 2, 2]))
    p4 = _cbr(g, _cbr(g, g.node("Concat", pools, axis=1), 128, 64, 1, act="SiLU"), 64, 64,
              stride=2, act="SiLU")
    up = g.node("Resize", [p4, "", g.const(np.array([1, 1, 2, 2], np.float32))], mode="nearest")
    neck = _cbr(g, g.node("Concat", [up, c2f], axis=1), 128, 64, act="SiLU")
    # Detect head: box branch (4 x 16 DFL bins) and class branch, then decode
    box = g.conv(_cbr(g, neck, 64, 64, act="SiLU"), 64, 64, 1, weight="float", std=0.05)
    cls = g.conv(_cbr(g, neck, 64, 64, act="SiLU"), 64, 16, 1, weight="float", std=0.05)
    hw = (size // 4) ** 2
    box = g.node("Reshape", [box, g.const(np.array([1, 4, 16, hw], np.int64))])
    box = g.node("Softmax", [g.node("Transpose", [box], perm=[0, 2, 1, 3])], axis=1)
    dfl = g.const(np.arange(16, dtype=np.float32).reshape(1, 16, 1, 1), "dfl.weight")
    box = g.node("Conv", [box, dfl], name="dfl", kernel_shape=[1, 1])
    box = g.node("Reshape", [box, g.const(np.array([1, 4, hw], np.int64))])
    lt, rb = g.fresh("lt"), g.fresh("rb")
    g.nodes.append(__import__("onnx").helper.make_node(
        "Split", [box, g.const(np.array([2, 2], np.int64))], [lt, rb], axis=1, name="decode.split"))
    anchors = g.const(np.random.default_rng(0).uniform(0, size, (1, 2, hw)).astype(np.float32))
    xy = g.node("Sub", [anchors, lt])
    wh = g.node("Add", [anchors, rb])
    boxes = g.node("Mul", [g.node("Concat", [xy, wh], axis=1), g.const(np.float32(4.0))])
    scores = g.node("Sigmoid", [g.node("Reshape", [cls, g.const(np.array([1, 16, hw],
                                                                         np.int64))])])
    g.node("Concat", [boxes, scores], axis=1, out="detections")
    g.output("detections", [1, 20, hw])
    return g


def mobilenet(size: int = 32, hardswish: str = "HardSwish") -> GraphBuilder:
    """``hardswish="HardSwishMath"`` spells each HardSwish as Add, Clip, Mul and Div."""
    g = GraphBuilder("mobilenet_like", seed=3, opset=14)
    x = g.input("images", [1, 3, size, size])
    x = _cbr(g, x, 3, 16, stride=2, act=hardswish)
    for cin, mid, cout in ((16, 64, 24), (24, 72, 24)):
        y = _cbr(g, x, cin, mid, 1, act=hardswish)
        y = _cbr(g, y, mid, mid, 3, act=hardswish, group=mid)  # depthwise
        se = g.node("GlobalAveragePool", [y])
        se = g.node("Relu", [g.conv(se, mid, 16, 1, weight="float", std=0.2)])
        se = g.node("HardSigmoid", [g.conv(se, 16, mid, 1, weight="float", std=0.2)])
        y = g.node("Mul", [y, se])
        y = _cbr(g, y, mid, cout, 1, act="none")
        x = g.node("Add", [x, y]) if cin == cout else y
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x])])
    g.gemm(x, 24, 10, weight="float", out="logits")
    g.output("logits", [1, 10])
    return g


def transformer(tokens: int = 16, dim: int = 64, batch: int | str = 1) -> GraphBuilder:
    g = GraphBuilder("transformer_block", seed=4, opset=17)
    x = g.input("tokens", [batch, tokens, dim])

    def linear(v: str, cin: int, cout: int) -> str:
        w = g.const(g.rng.normal(0, 1 / np.sqrt(cin), (cin, cout)).astype(np.float32))
        return g.node("Add", [g.node("MatMul", [v, w]), g.const(np.zeros(cout, np.float32))])

    def norm(v: str) -> str:
        return g.node("LayerNormalization", [v, g.const(np.ones(dim, np.float32)),
                                             g.const(np.zeros(dim, np.float32))], axis=-1)

    h = norm(x)
    q, k, v = (linear(h, dim, dim) for _ in range(3))
    att = g.node("MatMul", [q, g.node("Transpose", [k], perm=[0, 2, 1])])
    att = g.node("Softmax", [g.node("Mul", [att, g.const(np.float32(1 / np.sqrt(dim)))])], axis=-1)
    x = g.node("Add", [x, linear(g.node("MatMul", [att, v]), dim, dim)])
    h = linear(norm(x), dim, 4 * dim)
    gelu = g.node("Mul", [g.node("Mul", [h, g.node("Add", [g.node("Erf", [
        g.node("Div", [h, g.const(np.float32(np.sqrt(2.0)))])]), g.const(np.float32(1.0))])]),
        g.const(np.float32(0.5))])
    g.node("Add", [x, linear(gelu, 4 * dim, dim)], out="hidden")
    g.output("hidden", [batch, tokens, dim])
    return g


def svtr(width: int | str = 32, dim: int = 64) -> GraphBuilder:
    """A text recognizer shaped like PP-OCRv4's SVTR: a conv stem, an AveragePool, then tokens
    through transformer blocks with LayerNorm decomposed into ReduceMean/Sub/Pow/Sqrt/Div/Mul/Add
    (as Paddle exports it), attention with Transpose/Reshape copies, Swish MLPs, residual Adds,
    and back to NCHW for a conv and a shortcut Concat. ``width`` may be symbolic."""
    g = GraphBuilder("svtr_like", seed=6, opset=17)
    x = g.input("x", [1, 3, 8, width])
    x = _cbr(g, x, 3, 32, stride=2)
    x = _cbr(g, x, 32, dim)
    x = g.node("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])  # [1, dim, 2, w/4]
    shortcut = x
    t = g.node("Transpose", [g.node("Reshape", [x, g.const(np.array([1, dim, -1], np.int64))])],
               perm=[0, 2, 1])  # [1, tokens, dim]

    def linear(v: str, cin: int, cout: int) -> str:
        w = g.const(g.rng.normal(0, 1 / np.sqrt(cin), (cin, cout)).astype(np.float32))
        return g.node("Add", [g.node("MatMul", [v, w]), g.const(np.zeros(cout, np.float32))])

    def norm(v: str) -> str:
        centered = g.node("Sub", [v, g.node("ReduceMean", [v], axes=[-1])])
        var = g.node("ReduceMean", [g.node("Pow", [centered, g.const(np.float32(2.0))])],
                     axes=[-1])
        std = g.node("Sqrt", [g.node("Add", [var, g.const(np.float32(1e-5))])])
        scaled = g.node("Mul", [g.node("Div", [centered, std]), g.const(np.ones(dim, np.float32))])
        return g.node("Add", [scaled, g.const(np.zeros(dim, np.float32))])

    for _ in range(2):
        h = norm(t)
        q, k, v = (linear(h, dim, dim) for _ in range(3))
        att = g.node("MatMul", [q, g.node("Transpose", [k], perm=[0, 2, 1])])
        att = g.node("Softmax", [g.node("Mul", [att, g.const(np.float32(1 / np.sqrt(dim)))])],
                     axis=-1)
        core = g.node("Reshape", [g.node("Transpose", [g.node("MatMul", [att, v])],
                                         perm=[0, 2, 1]),
                                  g.const(np.array([1, -1, dim], np.int64))])
        t = g.node("Add", [t, linear(core, dim, dim)])
        h = linear(norm(t), dim, 2 * dim)
        h = g.node("Mul", [h, g.node("Sigmoid", [h])])
        t = g.node("Add", [t, linear(h, 2 * dim, dim)])
    t = norm(t)
    back = g.node("Reshape", [g.node("Transpose", [t], perm=[0, 2, 1]),
                              g.node("Shape", [shortcut])])
    y = _cbr(g, back, dim, dim, 1)
    y = _cbr(g, g.node("Concat", [shortcut, y], axis=1), 2 * dim, dim)
    y = g.node("Transpose", [g.node("ReduceMean", [y], axes=[2], keepdims=0)], perm=[0, 2, 1])
    g.node("Softmax", [linear(y, dim, 40)], axis=-1, out="probs")
    g.output("probs", [1, "steps", 40] if isinstance(width, str) else None)
    return g


def psa(channels: int = 256, size: int = 40) -> GraphBuilder:
    """YOLO11's position-sensitive attention (C2PSA) between conv stacks: a 1x1 conv writes the
    query and value halves; the attention MatMuls and Softmax stay float; a depthwise
    positional-encoding conv reads the value half, added to the attention output before the
    projection conv."""
    g = GraphBuilder("psa", seed=3, opset=17)
    c, hw = channels, size
    y = g.node("Relu", [g.conv(g.input("x", [1, c, hw, hw]), c, c, 1, weight="float")])
    y = g.node("Relu", [g.conv(y, c, c, 3, weight="float")])
    g.node("Split", [g.conv(y, c, 2 * c, 1, weight="float", name="qkv"),
                     g.const(np.array([c, c], np.int64))], name="split", outputs=2, axis=1)
    q, v = "split_out0", "split_out1"
    rows = g.const(np.array([1, c, hw * hw], np.int64))
    flat = g.node("Reshape", [q, rows])
    attn = g.node("Softmax", [g.node("MatMul", [g.node("Transpose", [flat], perm=[0, 2, 1]),
                                                flat])], axis=-1)
    out = g.node("Reshape", [g.node("MatMul", [g.node("Reshape", [v, rows]), attn]),
                             g.const(np.array([1, c, hw, hw], np.int64))])
    pe = g.conv(v, c, c, 3, group=c, weight="float", name="pe")
    y = g.node("Relu", [g.conv(g.node("Add", [out, pe]), c, c, 1, weight="float", name="proj")])
    for _ in range(4):
        y = g.node("Relu", [g.conv(y, c, c, 3, weight="float")])
    g.output(y)
    return g


def all_models() -> dict[str, GraphBuilder]:
    return {"resnet": resnet(), "yolo": yolo(), "mobilenet": mobilenet(),
            "transformer": transformer()}


def calibration_batches(g: GraphBuilder, count: int = 8, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    batches = []
    for value in g.inputs:
        dims = [d.dim_value or 1 for d in value.type.tensor_type.shape.dim]
        assert value.type.tensor_type.elem_type == TensorProto.FLOAT
        batches.append((value.name, dims))
    return [{name: rng.normal(0, 1, dims).astype(np.float32) for name, dims in batches}
            for _ in range(count)]
