"""profile: onnxruntime node times with MACs and a loadable trace; trtexec host/device verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from qdqkit.cli import main
from qdqkit.core.errors import QdqkitError
from qdqkit.profiling import profile_model, read_trtexec_times
from tests.comparison.models import small_net
from tests.models import windowed_audio_model

FIXTURES = Path(__file__).parents[1] / "fixtures"
TIMES = FIXTURES / "trtexec-times"
QAT_SUMMARY = FIXTURES / "trex-resnet18-a100/qat/resnet-qat.onnx.engine.profile.metadata.json"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("profile") / "net.onnx"
    onnx.save(small_net().float_model(), path)
    return path


def test_every_node_is_timed_with_macs_and_bytes_and_the_trace_loads(model: Path,
                                                                     tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    result = profile_model(model, runs=3, trace=trace)
    graph = onnx.load(model).graph
    assert sorted(n.name for n in result.nodes) == sorted(n.name for n in graph.node)
    assert [n.mean_ms for n in result.nodes] == sorted((n.mean_ms for n in result.nodes),
                                                       reverse=True)
    assert sum(n.share for n in result.nodes) == pytest.approx(1.0)
    node = {n.name: n for n in result.nodes}
    # Conv MACs: output elements x (input channels x kernel area); 8x16x16 outputs, 8x3x3 each.
    assert node["body1"].macs == 8 * 16 * 16 * 8 * 3 * 3
    assert node["stem"].macs == 8 * 16 * 16 * 3 * 3 * 3
    assert node["body1_relu"].bytes == 2 * 8 * 16 * 16 * 4  # reads and writes one fp32 tensor
    ops = {o.op_type: o for o in result.op_types}
    assert ops["Conv"].nodes == 4 and ops["Conv"].macs == sum(
        n.macs for n in result.nodes if n.op_type == "Conv")
    events = json.loads(trace.read_text())["traceEvents"]
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in events)
    assert sum(e["name"] == "model_run" for e in events) == 3  # the warm-up run is dropped
    kernels = [e for e in events if e["cat"] == "Node" and e["name"].endswith("_kernel_time")]
    assert len(kernels) == 3 * len(graph.node)


def test_given_data_feeds_the_profile_and_bad_input_is_refused(model: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]
                                                               ) -> None:
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 16, 16), np.float32))
    result = profile_model(model, tmp_path / "x.npy", runs=1)
    assert not result.notes and "x.npy" in result.data
    with pytest.raises(QdqkitError, match="at least 1"):
        profile_model(model, runs=0)
    assert main(["profile", str(model), "--runs", "2", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "slowest nodes" in out and "Conv" in out
    assert main(["profile", str(tmp_path / "missing.onnx")]) == 2


def test_exported_times_say_host_bound_or_device_bound() -> None:
    host = read_trtexec_times(TIMES / "host-bound.times.json")
    records = json.loads((TIMES / "host-bound.times.json").read_text())
    assert host.iterations == len(records) == 40
    enqueue = sorted(r["endEnqMs"] - r["startEnqMs"] for r in records)
    assert host.phase("enqueue").median_ms == pytest.approx((enqueue[19] + enqueue[20]) / 2)
    spans = [(r["startComputeMs"], r["endComputeMs"]) for r in records]
    busy = sum(e - s for s, e in spans) / (spans[-1][1] - spans[0][0])
    assert host.gpu_busy == pytest.approx(busy)
    assert host.bound == "host" and "enqueue" in host.reason
    device = read_trtexec_times(TIMES / "device-bound.times.json")
    assert device.bound == "device" and device.gpu_busy > 0.9


def test_a_real_performance_summary_is_device_bound(capsys: pytest.CaptureFixture[str]) -> None:
    timing = read_trtexec_times(QAT_SUMMARY)
    summary = json.loads(QAT_SUMMARY.read_text())["performance_summary"]
    assert timing.phase("compute").median_ms == summary["GPU Compute Time"][3]
    assert timing.phase("enqueue").median_ms == summary["Enqueue Time"][3]
    assert timing.bound == "device" and timing.iterations is None
    assert main(["profile", str(QAT_SUMMARY), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bound"] == "device"


def test_tensorrt7_spelling_and_copy_bound_pipelines(tmp_path: Path) -> None:
    records = [{"startInMs": i * 1.0, "endInMs": i * 1.0 + 0.6, "startComputeMs": i + 0.6,
                "endComputeMs": i + 0.8, "startOutMs": i + 0.8, "endOutMs": i + 0.95,
                "inMs": 0.6, "computeMs": 0.2, "outMs": 0.15, "latencyMs": 0.95}
               for i in range(5)]
    path = tmp_path / "t7.json"
    path.write_text(json.dumps(records))
    timing = read_trtexec_times(path)
    assert timing.phase("h2d").median_ms == pytest.approx(0.6)
    assert timing.bound == "transfer"
    (tmp_path / "bad.json").write_text('{"nothing": 1}')
    with pytest.raises(QdqkitError, match="GPU Compute Time"):
        read_trtexec_times(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(QdqkitError, match="exportTimes"):
        read_trtexec_times(tmp_path / "list.json")


def test_profile_on_a_guessed_length_the_model_cannot_run_asks_for_shapes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "window.onnx"
    onnx.save(windowed_audio_model(), path)
    assert main(["profile", str(path), "--runs", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "'wave'[1] samples = 32" in err and "--shapes" in err, err
    assert main(["profile", str(path), "--runs", "1", "--shapes", "wave:1x1024"]) == 0
