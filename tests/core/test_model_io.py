from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import external_data_helper

from qdqkit.core.atomic import output_set
from qdqkit.core.errors import ModelLoadError, OutputError
from qdqkit.core.model_io import load_model, stage_model
from tests.models import qdq_conv_model


def _save_with_external_data(tmp_path: Path, location: str) -> Path:
    model = qdq_conv_model()
    external_data_helper.convert_model_to_external_data(
        model, all_tensors_to_one_file=True, location="weights.bin", size_threshold=0
    )
    path = tmp_path / "m.onnx"
    onnx.save(model, path)  # writes weights.bin beside it
    if location != "weights.bin":
        proto = onnx.load(path, load_external_data=False)
        for init in proto.graph.initializer:
            for entry in init.external_data:
                if entry.key == "location":
                    entry.value = location
        path.write_bytes(proto.SerializeToString())
    return path


def test_loads_a_model_with_external_data(tmp_path: Path) -> None:
    path = _save_with_external_data(tmp_path, "weights.bin")
    model = load_model(path)
    w = model.graph.initializers["w"].const_value
    assert w is not None and w.numpy().shape == (4, 3, 3, 3)


@pytest.mark.parametrize("location", ["../outside.bin", "/etc/passwd", "sub/../../x.bin"])
def test_refuses_external_data_outside_the_model_folder(tmp_path: Path, location: str) -> None:
    path = _save_with_external_data(tmp_path, location)
    with pytest.raises(ModelLoadError, match=r"outside the model's folder|absolute path"):
        load_model(path)


def test_refuses_missing_external_data(tmp_path: Path) -> None:
    path = _save_with_external_data(tmp_path, "weights.bin")
    (tmp_path / "weights.bin").unlink()
    with pytest.raises(ModelLoadError, match="missing"):
        load_model(path)


def test_refuses_truncated_external_data(tmp_path: Path) -> None:
    path = _save_with_external_data(tmp_path, "weights.bin")
    data = tmp_path / "weights.bin"
    data.write_bytes(data.read_bytes()[:10])
    with pytest.raises(ModelLoadError, match="truncated data file"):
        load_model(path)


@pytest.mark.parametrize("cut", [0, 7, 100, 300])
def test_refuses_empty_or_truncated_model_files(tmp_path: Path, cut: int) -> None:
    whole = qdq_conv_model().SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(whole[:cut])
    with pytest.raises(ModelLoadError) as info:
        load_model(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("lazy_weights", [False, True])
def test_a_tensor_defined_twice_is_named_with_both_definitions(
    tmp_path: Path, lazy_weights: bool
) -> None:
    # onnxruntime's quantizer has written such files: an initializer named like a node output.
    model = qdq_conv_model()
    conv = next(n for n in model.graph.node if n.op_type == "Conv")
    clash = onnx.numpy_helper.from_array(np.zeros(1, np.float32), conv.output[0])
    model.graph.initializer.append(clash)
    path = tmp_path / "twice.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ModelLoadError) as info:
        load_model(path, lazy_weights=lazy_weights)
    message = str(info.value)
    assert message.startswith(f"{path}: tensor '{conv.output[0]}' is defined twice, by an "
                              f"initializer and by node '{conv.name}'")
    assert "\n" not in message


def test_refuses_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="no such file"):
        load_model(tmp_path / "nope.onnx")
    with pytest.raises(ModelLoadError, match="is a folder"):
        load_model(tmp_path)


def test_stage_model_roundtrips_and_never_overwrites_the_input(tmp_path: Path) -> None:
    src = tmp_path / "in.onnx"
    onnx.save(qdq_conv_model(), src)
    model = load_model(src)
    before = src.read_bytes()
    with (
        pytest.raises(OutputError, match="overwrite the input"),
        output_set(protected=(src,)) as out,
    ):
        stage_model(out, model, src)
    assert src.read_bytes() == before
    target = tmp_path / "out" / "copy.onnx"
    with output_set(protected=(src,)) as out:
        stage_model(out, model, target)
    again = {i.name: onnx.numpy_helper.to_array(i) for i in onnx.load(target).graph.initializer}
    original = {i.name: onnx.numpy_helper.to_array(i) for i in qdq_conv_model().graph.initializer}
    assert again.keys() == original.keys()
    for name, array in original.items():
        np.testing.assert_array_equal(again[name], array)
    assert [p.name for p in target.parent.iterdir()] == ["copy.onnx"]


def test_failed_output_set_leaves_nothing_behind(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), output_set() as out:
        out.stage_text(tmp_path / "a.txt", "a")
        out.stage_text(tmp_path / "b.txt", "b")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_outputs_get_the_normal_file_mode(tmp_path: Path) -> None:
    import os

    mask = os.umask(0o022)
    try:
        with output_set() as out:
            out.stage_text(tmp_path / "a.txt", "a")
    finally:
        os.umask(mask)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644


def test_a_git_lfs_pointer_is_named(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    path.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 123\n")
    with pytest.raises(ModelLoadError, match=r"Git LFS pointer.*git lfs pull"):
        load_model(path)


def test_a_fifo_is_not_called_missing(tmp_path: Path) -> None:
    import os

    model_fifo = tmp_path / "fifo.onnx"
    os.mkfifo(model_fifo)
    with pytest.raises(ModelLoadError, match="not a regular file"):
        load_model(model_fifo)
    path = _save_with_external_data(tmp_path, "weights.bin")
    (tmp_path / "weights.bin").unlink()
    os.mkfifo(tmp_path / "weights.bin")
    with pytest.raises(ModelLoadError, match="not a regular file"):
        load_model(path)


SIGTERM_CHILD = r"""
import sys, time
from pathlib import Path
from qdqkit.core.atomic import output_set
target = Path(sys.argv[1])
with output_set() as out:
    def slow(tmp):
        with open(tmp, "wb") as f:
            f.write(b"x" * 1_000_000)
            f.flush()
            print("writing", flush=True)
            time.sleep(30)
    out.stage_writer(target, slow)
"""


def test_sigterm_during_a_write_leaves_no_temporary(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {"PYTHONPATH": f"{root / 'src'}:{root}", "PATH": "/usr/bin:/bin"}
    child = subprocess.Popen([sys.executable, "-c", SIGTERM_CHILD, str(tmp_path / "out.bin")],
                             stdout=subprocess.PIPE, env=env)
    assert child.stdout is not None and child.stdout.readline().strip() == b"writing"
    assert any(p.name.startswith(".out.bin.") for p in tmp_path.iterdir())
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=20) == -signal.SIGTERM  # still ends as SIGTERM does
    assert list(tmp_path.iterdir()) == []
