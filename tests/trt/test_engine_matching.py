"""Layer matching between engines that name things differently.

The renamed engines are built here from the real ResNet-18 exports by renaming consistently (every
ONNX node, layer and tensor name), so the truth of each pairing is the renaming itself, or a fact
read from the raw files (a fused layer's weight name, the exporter's node numbering), never the
matcher's own evidence.
"""

from __future__ import annotations

import copy
import gc
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from qdqkit.engine.diff import diff_engines
from qdqkit.engine.synthetic import synthetic_engine
from qdqkit.trt.engine import EngineGraph
from qdqkit.trt.engine_json import onnx_nodes_of, parse_engine_graph
from qdqkit.trt.engine_matching import match_layers
from qdqkit.trt.onnx_names import comparable_names, is_auto_numbered, unwrap_node_name
from tests.engine.fixture_files import raw_graph, weight_key

_COPY_PREFIX = re.compile(r"^(Reformatting CopyNode for (?:Input|Output) Tensor \d+ to )(.*)$")
_REFORMATTED = re.compile(r"^(Reformatted (?:Input|Output) Tensor \d+ to )(.*)$")


class Renamer:
    """Renames node and tensor names consistently, as another exporter would.

    ``tf``: every name becomes a TensorFlow-style path with a fresh, shuffled number
    (``model/quant_conv2d_17/Conv2D``), so no name of the original survives.
    ``renumber``: auto-numbered names keep their op but take the number of another node of the
    original (``QuantizeLinear_15`` becomes ``QuantizeLinear_40``), so equal names now mean
    different nodes; other names stay.
    """

    def __init__(self, raw: dict[str, Any], style: str) -> None:
        self.style = style
        tokens: list[str] = []
        for layer in raw["Layers"]:
            for part in self._parts(layer["Name"]):
                if part not in tokens:
                    tokens.append(part)
        self.node_map: dict[str, str] = {}
        if style == "tf":
            order = sorted(range(len(tokens)), key=lambda k: (k * 7919) % len(tokens))
            for new_number, k in enumerate(order):
                token = tokens[k]
                family = "kernel" if token.endswith(".weight") else re.sub(
                    r"[^A-Za-z]", "", token.split("_")[0]).lower() or "node"
                self.node_map[token] = f"model/quant_{family}_{new_number}/{family.title()}"
        else:
            numbered = [t for t in tokens if re.fullmatch(r"[A-Za-z]+_\d+", t)]
            numbers = sorted({int(t.rsplit("_", 1)[1]) for t in numbered})
            shifted = {n: numbers[(i + 3) % len(numbers)] for i, n in enumerate(numbers)}
            for token in numbered:
                op, number = token.rsplit("_", 1)
                self.node_map[token] = f"{op}_{shifted[int(number)]}"
        self.tensor_map: dict[str, str] = {}

    @staticmethod
    def _parts(name: str) -> list[str]:
        match = _COPY_PREFIX.match(name)
        return Renamer._parts(match.group(2)) if match else name.split(" + ")

    def layer_name(self, name: str) -> str:
        match = _COPY_PREFIX.match(name)
        if match:
            return match.group(1) + self.layer_name(match.group(2))
        return " + ".join(self.node_map.get(p, p) for p in name.split(" + "))

    def tensor_name(self, name: str) -> str:
        match = _REFORMATTED.match(name)
        if match:
            return match.group(1) + self.layer_name(match.group(2))
        if self.style != "tf":
            return name
        return self.tensor_map.setdefault(name, f"tensor_{len(self.tensor_map)}")

    def engine(self, raw: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(raw)
        for layer in out["Layers"]:
            layer["Name"] = self.layer_name(layer["Name"])
            for tensor in layer["Inputs"] + layer["Outputs"]:
                tensor["Name"] = self.tensor_name(tensor["Name"])
        out["Bindings"] = [self.tensor_name(b) for b in out["Bindings"]]
        return out


def _pairs(a: EngineGraph, b: EngineGraph) -> dict[str, str]:
    return {a.layers[i].name: b.layers[j].name for i, j in match_layers(a, b).pairs}


def _is_conv(layer: dict[str, Any]) -> bool:
    return layer["LayerType"] in ("CaskConvolution", "ConvActPool")


def test_renaming_leaves_no_name_and_keeps_the_structure() -> None:
    raw = raw_graph("qat-residual")
    renamed = Renamer(raw, "tf").engine(raw)
    names = {p for layer in raw["Layers"] for p in layer["Name"].split(" + ")}
    new_names = {p for layer in renamed["Layers"] for p in layer["Name"].split(" + ")}
    assert not names & new_names
    assert [la["LayerType"] for la in renamed["Layers"]] == [la["LayerType"] for la in raw["Layers"]]


def test_tf_renamed_engine_with_other_fusions_pairs_every_convolution_by_its_weight() -> None:
    # The residual-quantized build fuses the residual Add into another convolution than plain QAT
    # and folds the MaxPool into conv1; with every name changed, structure alone must pair them.
    raw_a, raw_b = raw_graph("qat"), raw_graph("qat-residual")
    renamer = Renamer(raw_b, "tf")
    b_weight = {renamer.layer_name(la["Name"]): weight_key(la["Name"])
                for la in raw_b["Layers"] if _is_conv(la)}
    a = parse_engine_graph(raw_a, "qat.json")
    b = parse_engine_graph(renamer.engine(raw_b), "renamed.json")
    pairs = _pairs(a, b)
    convs_a = [la["Name"] for la in raw_a["Layers"] if _is_conv(la)]
    assert len(convs_a) == 21
    for name in convs_a:
        assert b_weight[pairs[name]] == weight_key(name), name
    # The MaxPool this build ran alone sits in conv1 of the other build.
    matching = match_layers(a, b)
    folded = {a.layers[i].name for group in matching.fused_into_b.values() for i in group}
    assert folded == {"MaxPool_12"}


def _module_order(raw: dict[str, Any], number_of: Any) -> list[str]:
    """Convolution and Gemm layers sorted by the exporter's node number: module order."""
    layers = [la["Name"] for la in raw["Layers"] if _is_conv(la)]
    return sorted(layers, key=number_of)


def test_fp16_engine_against_tf_renamed_qat_engine_pairs_every_weighted_layer() -> None:
    # The Keras FP16-versus-QAT case: the float build has no Q/DQ Reformats and other copies, the
    # QAT build is renamed. Truth: both exports number their nodes in module order, so the k-th
    # convolution of one (by Conv_/Gemm_ number) is the k-th of the other (by weight quantizer).
    raw_fp16, raw_qat = raw_graph("fp16"), raw_graph("qat")
    fp16_order = _module_order(raw_fp16, lambda n: int(re.search(r"(?:Conv|Gemm)_(\d+)", n)[1]))
    qat_order = _module_order(raw_qat, lambda n: int(re.search(r"QuantizeLinear_(\d+)", n)[1]))
    renamer = Renamer(raw_qat, "tf")
    expected = {f: renamer.layer_name(q) for f, q in zip(fp16_order, qat_order, strict=True)}
    a = parse_engine_graph(raw_fp16, "fp16.json")
    b = parse_engine_graph(renamer.engine(raw_qat), "qat-renamed.json")
    pairs = _pairs(a, b)
    assert {f: pairs.get(f) for f in expected} == expected
    diff = diff_engines(a, b)
    assert diff.b.int8_compute_layers == sum(
        1 for la in raw_qat["Layers"] if _is_conv(la) and "Int8" in la["Inputs"][0]["Format/Datatype"])


@pytest.mark.parametrize("variant", ["qat", "qat-residual"])
def test_renumbered_auto_names_do_not_pair_layers_that_share_a_name(variant: str) -> None:
    # Every auto-numbered name of B is the name of another node in A (QuantizeLinear_15, an
    # activation quantizer in A, names a weight quantizer in B); on top, the strong names are
    # gone. Each layer must still pair with itself.
    raw = raw_graph(variant)
    renumbered = Renamer(raw, "renumber").engine(raw)
    stripped = Renamer(renumbered, "tf")
    stripped.node_map = {k: v for k, v in stripped.node_map.items() if not is_auto_numbered(k)}
    b_raw = stripped.engine(renumbered)
    a_names = {la["Name"] for la in raw["Layers"]}
    collisions = [la["Name"] for la in b_raw["Layers"] if la["Name"] in a_names]
    assert collisions, "the construction must reuse names of A for other layers"
    a = parse_engine_graph(raw, "a.json")
    b = parse_engine_graph(b_raw, "b.json")
    matching = match_layers(a, b)
    assert matching.pairs == [(i, i) for i in range(len(raw["Layers"]))]
    assert matching.only_a == [] and matching.only_b == []


def test_pointwise_wrappers_are_unwrapped_into_node_names() -> None:
    assert unwrap_node_name("PWN(Clip_550)") == ["Clip_550"]
    assert unwrap_node_name("PWN(PWN(Sigmoid_3), Mul_4)") == ["Sigmoid_3", "Mul_4"]
    assert unwrap_node_name("PWN((Unnamed Layer* 7) [Shuffle], Add_9)") == [
        "(Unnamed Layer* 7) [Shuffle]", "Add_9"]
    assert onnx_nodes_of("Conv_546 + PWN(Clip_550)") == ["Conv_546", "Clip_550"]


def _engine(layers: list[tuple[str, str, str, str]]) -> EngineGraph:
    fmt = "Row major linear FP16 format"
    data = {"Layers": [
        {"Name": name, "LayerType": kind,
         "Inputs": [{"Name": src, "Format/Datatype": fmt, "Dimensions": [1, 32, 8, 8]}],
         "Outputs": [{"Name": dst, "Format/Datatype": fmt, "Dimensions": [1, 32, 8, 8]}]}
        for name, kind, src, dst in layers], "Bindings": ["x", layers[-1][3]]}
    return parse_engine_graph(data, "engine.json")


def test_a_pointwise_layer_fused_as_pwn_is_found_inside_the_fused_layer() -> None:
    a = _engine([("Conv_546", "CaskConvolution", "x", "c"),
                 ("Clip_550", "PointWise", "c", "y"),
                 ("Conv_560", "CaskConvolution", "y", "z")])
    b = _engine([("Conv_546 + PWN(Clip_550)", "CaskConvolution", "x", "y"),
                 ("Conv_560", "CaskConvolution", "y", "z")])
    matching = match_layers(a, b)
    assert (0, 0) in matching.pairs and (2, 1) in matching.pairs
    assert matching.fused_into_b == {0: [1]}


def _renamed_synthetic(layers: int) -> tuple[EngineGraph, EngineGraph]:
    data, _ = synthetic_engine(layers)
    other = Renamer(data, "tf").engine(data)
    return parse_engine_graph(data, "a.json"), parse_engine_graph(other, "b.json")


def test_matching_is_linear_and_exact_on_an_860_layer_renamed_engine() -> None:
    def timed(n: int) -> float:
        a, b = _renamed_synthetic(n)
        # CPU time, with the collector held off: neither other load on the machine nor a
        # collection of the rest of the test session's heap counts against the matcher.
        gc.collect()
        gc.disable()
        try:
            start = time.process_time()
            matching = match_layers(a, b)
            elapsed = time.process_time() - start
        finally:
            gc.enable()
        assert len(matching.pairs) == n
        return elapsed

    small = min(timed(430) for _ in range(3))
    big = min(timed(1720) for _ in range(3))
    assert big < 1.0
    assert big / small < 4 * 2.0  # four times the layers: well under sixteen times the time


def test_json_of_the_constructed_engines_round_trips() -> None:
    raw = raw_graph("qat")
    assert json.loads(json.dumps(Renamer(raw, "tf").engine(raw)))["Layers"]


_KERAS = Path(__file__).resolve().parent.parent / "fixtures" / "trex-resnet50-tf-rtx3090"
_BLOCK_CONV = re.compile(r"resnet50/(quant_)?(conv\d_block\d+_[12]_conv)/Conv2D")


def test_keras_fp16_and_tfmot_qat_exports_pair_each_block_convolution_with_itself() -> None:
    # Real exports of one Keras ResNet-50: TensorFlow's QAT wrappers renamed every quantized
    # scope 'quant_...' and TensorRT fused other layers. Truth is read from the raw names: the
    # first two convolutions of each bottleneck (one layer each in both builds) must pair by
    # scope. Before names were compared without the renaming, stage 3 and 4 pairs shifted by a
    # block (conv3_block3_1 against conv3_block2_1).
    raw_a = json.loads((_KERAS / "fp16.resnet.onnx.engine.graph.json").read_text())
    raw_b = json.loads((_KERAS / "qat.resnet-qat.onnx.engine.graph.json").read_text())

    def scopes(raw: dict[str, Any]) -> dict[str, str]:
        found = {}
        for layer in raw["Layers"]:
            hit = _BLOCK_CONV.search(layer["Name"])
            if hit and layer["LayerType"] == "CaskConvolution":
                found[layer["Name"]] = hit[2]
        return found

    scope_a, scope_b = scopes(raw_a), scopes(raw_b)
    assert len(scope_a) == len(scope_b) == 32  # 16 bottlenecks x 2
    pairs = _pairs(parse_engine_graph(raw_a, "fp16.json"), parse_engine_graph(raw_b, "qat.json"))
    assert {name: scope_b.get(pairs.get(name, "")) for name in scope_a} == {
        name: scope for name, scope in scope_a.items()}
    # The 7x7 stem: the QAT build pads its input in a layer of its own (another input shape),
    # the FP16 build inside the convolution; alone next to the pair after it, it still pairs.
    (stem_a,) = [la["Name"] for la in raw_a["Layers"] if la.get("Kernel") == [7, 7]]
    (stem_b,) = [la["Name"] for la in raw_b["Layers"] if la.get("Kernel") == [7, 7]]
    assert pairs.get(stem_a) == stem_b


def test_names_are_compared_without_a_renaming_one_export_applies_throughout() -> None:
    plain = [f"net/conv{k}/Conv2D" for k in range(6)] + ["net/head_cls/MatMul"]
    wrapped = [f"net/quant_conv{k}/Conv2D" for k in range(6)] + ["net/head/MatMul"]
    as_a, as_b = comparable_names(plain, wrapped)
    assert [as_b[n] for n in wrapped[:6]] == [as_a[n] for n in plain[:6]]
    # 'cls' is in one name of seven: a node the other network lacks, not a renaming.
    assert as_a["net/head_cls/MatMul"] != as_b["net/head/MatMul"]
    assert is_auto_numbered("Conv__435") and is_auto_numbered("QuantLinearNode__630")
