"""``qdqkit lint`` and ``qdqkit rules`` end to end: output, exit codes, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from qdqkit.cli import main
from qdqkit.examples.graph import GraphBuilder
from qdqkit.examples.resnet import resnet18_qdq
from qdqkit.linting.catalog import RULES

TREX = Path(__file__).resolve().parents[1] / "fixtures" / "trex-resnet18-a100"


@pytest.fixture(scope="module")
def qgap(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("r18") / "resnet18-qgap.onnx"
    onnx.save(resnet18_qdq("qat-residual-qgap"), path)
    return path


def _save(g: GraphBuilder, path: Path) -> Path:
    onnx.save(g.proto(), path)
    return path


def test_lint_reports_errors_with_exit_code_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 32, 8, 8]))
    y = g.bn(g.conv(x, 32, 32, name="conv2"), 32)
    # The float skip makes the block write float where the next conv wants INT8 (C3).
    g.output(g.conv(g.qdq(g.node("Relu", [g.node("Add", [y, "x"], name="add")]), 0.2), 32, 32))
    code = main(["lint", str(_save(g, tmp_path / "m.onnx"))])
    out = capsys.readouterr().out
    assert code == 1
    assert "QDQ201 residual-skip-float [error; rule C3, D4, fixable]" in out
    assert "predicted engine:" in out and "INT8 MACs" in out


def test_lint_json_and_engine_comparison(qgap: Path, capsys: pytest.CaptureFixture[str]) -> None:
    real = TREX / "qat-residual-qgap" / "resnet-qat-residual-qgap.onnx.engine.graph.json"
    code = main(["lint", str(qgap), "--json", "--engine", str(real)])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["summary"]["qdq_reformats"] == 1
    comparison = data["comparison"]
    assert comparison["real_qdq_reformats"] == comparison["predicted_qdq_reformats"] == 1
    assert comparison["disagreements"] == []


def test_engine_comparison_lists_disagreements(qgap: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = TREX / "qat" / "resnet-qat.onnx.engine.graph.json"
    main(["lint", str(qgap), "--engine", str(other)])
    out = capsys.readouterr().out
    assert "Q/DQ Reformat layers" in out and "disagreements:" in out


def test_float_model_exits_0_and_says_float(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    g = GraphBuilder()
    g.output(g.conv(g.input("x", [1, 32, 8, 8]), 32, 32, weight="float"))
    assert main(["lint", str(_save(g, tmp_path / "f.onnx"))]) == 0
    assert "it is a float model" in capsys.readouterr().out


@pytest.mark.parametrize("content", [None, b"", b"\x08\x07garbage-not-a-model"])
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes | None
) -> None:
    path = tmp_path / "bad.onnx"
    if content is not None:
        path.write_bytes(content)
    assert main(["lint", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qdqkit: error: ") and err.count("\n") == 1 and "bad.onnx" in err


def test_truncated_model_is_rejected(qgap: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    truncated = tmp_path / "cut.onnx"
    truncated.write_bytes(qgap.read_bytes()[:5000])
    assert main(["lint", str(truncated)]) == 2
    assert "cut.onnx" in capsys.readouterr().err


def test_bad_engine_file_is_one_line(qgap: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    engine = tmp_path / "e.json"
    engine.write_text("{not json")
    assert main(["lint", str(qgap), "--engine", str(engine)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_rules_lists_and_explains(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules"]) == 0
    listing = capsys.readouterr().out
    assert all(rule.code in listing for rule in RULES)
    assert main(["rules", "qdq201"]) == 0
    text = capsys.readouterr().out
    assert "residual-skip-float" in text and "C3, D4" in text and "why it costs" in text
    assert main(["rules", "QDQ999"]) == 2
    assert "qdqkit rules" in capsys.readouterr().err


def test_catalog_is_consistent() -> None:
    import re

    codes = [rule.code for rule in RULES]
    assert len(codes) == len(set(codes))
    for rule in RULES:
        assert re.fullmatch(r"QDQ[1-5]\d\d", rule.code)
        assert re.fullmatch(r"[A-L]\d+(, [A-L]\d+)*", rule.rule_id), rule.code
        assert rule.why and rule.fix and rule.check and rule.summary


def test_qdqkit_lint_is_callable_in_any_import_order() -> None:
    import qdqkit
    import qdqkit.linting.catalog  # binds the package to the name qdqkit.linting

    g = GraphBuilder()
    g.output(g.conv(g.input("x", [1, 32, 8, 8]), 32, 32, weight="float"))
    assert qdqkit.lint(g.ir()).codes() == ["QDQ501"]
    assert qdqkit.predict_engine(g.ir()).layers


def test_latency_is_predicted_on_a_dla_core_for_target_dla_unless_a_device_is_named(
    qgap: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from qdqkit.linting import lint

    assert lint(qgap).latency.gpu == "A100"  # type: ignore[union-attr]
    assert lint(qgap, target="dla").latency.gpu == "ORIN-DLA"  # type: ignore[union-attr]
    assert lint(qgap, target="dla", gpu="A100").latency.gpu == "A100"  # type: ignore[union-attr]
    main(["lint", str(qgap), "--target", "dla"])
    assert "predicted latency on ORIN-DLA" in capsys.readouterr().out
    main(["lint", str(qgap), "--target", "dla", "--gpu", "orin"])
    assert "predicted latency on ORIN " in capsys.readouterr().out
    main(["lint", str(qgap)])
    assert "predicted latency on A100" in capsys.readouterr().out


def test_an_input_dimension_written_as_minus_one_reads_as_unknown(
        qgap: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Paddle exports write an unknown batch as dim_value -1, not as a named dimension.
    model = onnx.load(qgap)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    dims[0].dim_value = -1
    dims[2].dim_param = "h"
    path = tmp_path / "minus_one.onnx"
    onnx.save(model, path)
    main(["lint", str(path)])
    out = capsys.readouterr().out
    assert "(inputs input ?x3xhx224):" in out and "-1" not in out.split("predicted")[1]


def test_lint_of_a_quantized_model_uses_the_recorded_version_and_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.quantization.float_models import resnet

    builder = resnet()
    path = tmp_path / "q.onnx"
    assert main(["quantize", _save(builder, tmp_path / "f.onnx").as_posix(), "-o", str(path),
                 "--calib", "random", "--trt", "10", "--method", "max"]) in (0, 1)
    capsys.readouterr()
    assert main(["lint", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("TensorRT 10 (weakly typed, INT8+FP16 (--best)), target gpu")
    assert out[1] == ("  (the TensorRT version and the target qdqkit quantize built the model for; "
                      "--trt / --target to judge it for another)")
    main(["lint", str(path), "--trt", "11", "--target", "gpu", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert (result["trt"], result["from_model"]) == ("11", [])


def test_a_weighted_layer_inference_cannot_size_is_named_not_silently_left_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The Gemm reads a Reshape whose target shape arrives at run time: no MAC count, so the INT8
    # share covers the conv alone, and the report says which layer it leaves out.
    g = GraphBuilder()
    y = g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32, name="conv")
    flat = g.node("Reshape", [y, g.input("shape", [2], dtype=onnx.TensorProto.INT64)])
    g.gemm(g.qdq(flat), 2048, 10, name="head", out="logits")
    g.output("logits", [1, 10])
    main(["lint", str(_save(g, tmp_path / "m.onnx")), "--json"])
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert len(summary["unsized_layers"]) == 1 and "head" in summary["unsized_layers"][0]
    main(["lint", str(tmp_path / "m.onnx")])
    line = next(x for x in capsys.readouterr().out.splitlines() if "INT8 MACs" in x)
    assert line.endswith("not counted") and "shape inference cannot size" in line
