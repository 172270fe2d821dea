"""A synthetic ``--exportLayerInfo`` / ``--exportProfile`` pair of any size.

Real large engine exports are big and rarely redistributable; benchmarks and layout tests need an
800+ layer engine with the shape of a real one. This writes the TensorRT 8.x schema with repeated
residual stages like those of a QAT ResNet engine: a Q/DQ Reformat, an INT8 convolution, a fused
Conv+Add that reads an FP16 skip tensor, now and then a layout Reformat, and the zero-time NoOp
copies real engines are full of. Times vary by stage with a few hot convolutions, as in real
profiles. It is constructed, not measured: use it for speed and readability checks only, never as
evidence of TensorRT behaviour.
"""

from __future__ import annotations

from typing import Any

_INT8 = "Thirty-two wide channel vectorized row major Int8 format"
_FP16 = "Thirty-two wide channel vectorized row major FP16 format"
_FP16_HWC8 = "Channel major FP16 format where channel % 8 == 0"
_FP32 = "Row major linear FP32"


def _tensor(name: str, fmt: str, channels: int) -> dict[str, Any]:
    return {"Name": name, "Location": "Device", "Dimensions": [8, channels, 28, 28],
            "Format/Datatype": fmt}


def _layer(name: str, layer_type: str, inputs: list[dict[str, Any]],
           outputs: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"Name": name, "LayerType": layer_type, "Inputs": inputs, "Outputs": outputs, **extra}


def synthetic_engine(layer_count: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(graph_json, profile_json)`` with exactly ``layer_count`` layers."""
    layers: list[dict[str, Any]] = []
    current = _tensor("input", _FP32, 64)
    skip = current
    block = 0
    while len(layers) < layer_count:
        b = block
        q_out = _tensor(f"q{b}", _INT8, 64)
        layers.append(_layer(f"QuantizeLinear_{10 * b}", "Reformat", [current], [q_out],
                             Origin="QDQ", ParameterType="Reformat"))
        if block % 3 == 1:  # a view change TensorRT does not run (a NoOp copy, 0 ms)
            viewed = _tensor(f"v{b}", _INT8, 64)
            layers.append(_layer(f"Reformatting CopyNode for Input Tensor 0 to Conv_{10 * b + 2}",
                                 "NoOp", [q_out], [viewed]))
            q_out = viewed
        mid = _tensor(f"c{b}", _INT8, 64)
        layers.append(_layer(
            f"stage{b}.conv1.weight + QuantizeLinear_{10 * b + 1} + Conv_{10 * b + 2}",
            "CaskConvolution", [q_out], [mid], ParameterType="Convolution",
            TacticName="sm80_xmma_fprop_implicit_gemm_interleaved_i8i8_i8i32_f32",
        ))
        out = _tensor(f"r{b}", _FP16, 64)
        layers.append(_layer(
            f"stage{b}.conv2.weight + QuantizeLinear_{10 * b + 3} + Conv_{10 * b + 4} + "
            f"Add_{10 * b + 5} + Relu_{10 * b + 6}",
            "CaskConvolution", [mid, skip], [out], ParameterType="Convolution",
        ))
        current = skip = out
        if block % 7 == 6:  # an occasional layout change, as real engines have
            relaid = _tensor(f"l{b}", _FP16_HWC8, 64)
            layers.append(_layer(f"Reformatting CopyNode for Input Tensor 0 to Pool_{b}",
                                 "Reformat", [current], [relaid], Origin="REFORMAT"))
            pooled = _tensor(f"p{b}", _FP16_HWC8, 64)
            layers.append(_layer(f"Pool_{b}", "CudaPooling", [relaid], [pooled]))
            current = skip = pooled
        block += 1
    del layers[layer_count:]
    graph = {"Layers": layers, "Bindings": ["input", layers[-1]["Outputs"][0]["Name"]]}
    profile: list[dict[str, Any]] = [{"count": 100}]
    for i, layer in enumerate(layers):
        stage = 1 + (4 * i) // max(len(layers), 1)  # later stages: more channels, more time
        if layer["LayerType"] == "NoOp":
            ms = 0.0
        elif layer["LayerType"] == "CaskConvolution":
            ms = 0.01 * stage + 0.001 * (i % 7) + (0.12 if i % 97 == 41 else 0.0)
        else:
            ms = 0.004 + 0.001 * (i % 11)
        profile.append({"name": layer["Name"], "timeMs": ms * 100, "averageMs": ms,
                        "medianMs": ms, "percentage": 0.0})
    return graph, profile
