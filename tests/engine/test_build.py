"""``qdqkit engine build``: the trtexec command line per TensorRT version, and the missing-tool error.

No test here runs trtexec or pretends to: the command line is checked as built, and the error
when trtexec is absent is checked with an empty PATH.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from qdqkit.cli import build_parser, main
from qdqkit.core.errors import ToolNotFoundError
from qdqkit.engine.build import (
    EngineBuildError,
    Trtexec,
    build_command,
    find_trtexec,
    parse_trt_version,
)

EXPORTS = ["--exportLayerInfo=out/m.graph.json", "--exportProfile=out/m.profile.json",
           "--profilingVerbosity=detailed"]


@pytest.mark.parametrize(("banner", "version"), [
    ("&&&& RUNNING TensorRT.trtexec [TensorRT v8601] # trtexec --help", (8, 6, 1)),
    ("&&&& RUNNING TensorRT.trtexec [TensorRT v8205] # trtexec", (8, 2, 5)),
    ("&&&& RUNNING TensorRT.trtexec [TensorRT v100300] # trtexec", (10, 3, 0)),
    ("&&&& RUNNING TensorRT.trtexec [TensorRT v110000] # trtexec", (11, 0, 0)),
    ("no banner", None),
])
def test_version_from_the_trtexec_banner(banner: str, version: tuple[int, int, int] | None) -> None:
    assert parse_trt_version(banner) == version


def _command(version: tuple[int, int, int] | None, precision: str | None,
             extra: list[str] | None = None, flags: frozenset[str] = frozenset()
             ) -> tuple[list[str], list[str]]:
    tool = Trtexec("/opt/trt/bin/trtexec", version, flags)
    return build_command(tool, Path("m.onnx"), Path("out/m"), precision, extra or [])


def test_trt8_command_has_exports_precision_then_extra_args() -> None:
    command, notes = _command((8, 6, 1), "int8", ["--memPoolSize=workspace:1024"])
    assert command[0] == "/opt/trt/bin/trtexec" and command[1] == "--onnx=m.onnx"
    assert all(flag in command for flag in EXPORTS)
    assert "--saveEngine=out/m.engine" in command and "--separateProfileRun" in command
    assert command[-2:] == ["--int8", "--memPoolSize=workspace:1024"]
    assert notes == []
    assert _command((10, 3, 0), "best")[0][-1] == "--best"
    assert _command((10, 3, 0), "strongly-typed")[0][-1] == "--stronglyTyped"


@pytest.mark.parametrize("precision", ["int8", "fp16", "best"])
def test_trt11_drops_the_removed_weak_typing_flags_and_says_so(precision: str) -> None:
    command, notes = _command((11, 0, 0), precision)
    assert not {"--int8", "--fp16", "--best"} & set(command)
    assert all(flag in command for flag in EXPORTS)
    assert len(notes) == 1 and "strongly typed" in notes[0] and "TensorRT 11.0.0" in notes[0]


def test_flags_listed_by_trtexec_help_win_over_the_version_rule() -> None:
    flags = frozenset({"--exportLayerInfo", "--fp16"})
    command, notes = _command((10, 0, 0), "int8", flags=flags)
    assert "--int8" not in command and notes
    assert _command((10, 0, 0), "fp16", flags=flags)[0][-1] == "--fp16"


def test_versions_that_cannot_do_what_is_asked() -> None:
    with pytest.raises(EngineBuildError, match="no --stronglyTyped; it arrived in TensorRT 10"):
        _command((8, 6, 1), "strongly-typed")
    with pytest.raises(EngineBuildError, match=r"needs TensorRT 8\.2 or newer"):
        _command((8, 0, 1), "int8")


def test_missing_trtexec_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolNotFoundError, match="trtexec is not on PATH: install TensorRT"):
        find_trtexec()


def test_cli_build_without_trtexec_exits_2_with_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes(b"not used: the tool check comes first")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["engine", "build", str(model), "--int8"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qdqkit: error: trtexec is not on PATH") and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]  # nothing pretends to be built


def test_cli_passes_arguments_after_double_dash_to_trtexec() -> None:
    args = build_parser().parse_args(
        ["engine", "build", "m.onnx", "--best", "--", "--memPoolSize=workspace:64", "--noTF32"])
    assert args.precision == "best"
    assert args.trtexec_args == ["--memPoolSize=workspace:64", "--noTF32"]


def test_optional_export_flags_are_left_out_when_trtexec_help_lacks_them() -> None:
    flags = frozenset({"--exportLayerInfo", "--exportProfile", "--profilingVerbosity"})
    command, _ = _command((11, 0, 0), None, flags=flags)
    assert all(flag in command for flag in EXPORTS)
    assert not [c for c in command if c.startswith(("--exportTimes", "--separateProfileRun"))]
