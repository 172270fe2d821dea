"""The shared argument groups: one flag, one meaning and one set of accepted values everywhere."""

from __future__ import annotations

import pytest

from qdqkit.cli import build_parser
from qdqkit.cli.args import DataArgs, DataOptions, OutputArgs

PREDICTING = {"lint": ["lint", "m.onnx"], "engine diff": ["engine", "diff", "a.onnx", "b.json"]}


@pytest.mark.parametrize("command", sorted(PREDICTING))
@pytest.mark.parametrize(("spelling", "version"), [
    ("8.6", "8.6"), ("8", "8.6"), ("8.6.1", "8.6"), ("9", "8.6"), ("10", "10"), ("10.3", "10"),
    ("trt10", "10"), ("TRT11", "11"), ("11.0", "11"),
])
def test_trt_spellings_mean_the_same_in_every_command(command: str, spelling: str,
                                                      version: str) -> None:
    args = build_parser().parse_args([*PREDICTING[command], "--trt", spelling])
    # lint leaves a target not given to the model's quantize record (None), engine diff to gpu.
    assert args.trt == version and args.target == (None if command == "lint" else "gpu")


@pytest.mark.parametrize("command", sorted(PREDICTING))
def test_unknown_trt_version_is_a_usage_error(command: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args([*PREDICTING[command], "--trt", "7"])
    assert exit_info.value.code == 2
    assert "unknown TensorRT version '7': use one of 8.6, 10, 11" in capsys.readouterr().err
    defaults = build_parser().parse_args(PREDICTING[command])
    # lint: what quantize recorded in the model, else 8.6 and gpu (trt.build_record).
    expected = (None, None) if command == "lint" else ("8.6", "gpu")
    assert (defaults.trt, defaults.target) == expected


def test_the_old_version_helper_stays_importable() -> None:
    from qdqkit.trt import predict, versions

    assert predict.normalize_trt_version is versions.normalize_trt_version
    assert predict.TRT_VERSIONS == versions.TRT_VERSIONS == ("8.6", "10", "11")


@pytest.mark.parametrize("argv", [
    ["translate", "-i", "m.onnx", "-o", "out"],
    ["translate", "-i", "m.onnx", "--output", "out"],
    ["translate", "-i", "m.onnx", "--output_dir", "out"],
    ["translate", "-i", "m.onnx", "--output-dir", "out"],
    ["engine", "draw", "g.json", "-o", "out"],
    ["engine", "draw", "g.json", "--output", "out"],
    ["engine", "build", "m.onnx", "-o", "out"],
    ["engine", "build", "m.onnx", "--output-dir", "out"],
])
def test_output_is_dash_o_or_dash_dash_output_everywhere(argv: list[str]) -> None:
    assert build_parser().parse_args(argv).output == "out"


def test_output_defaults() -> None:
    parser = build_parser()
    assert parser.parse_args(["translate", "-i", "m.onnx"]).output == "./translated"
    assert parser.parse_args(["engine", "build", "m.onnx"]).output is None
    group = OutputArgs("where", required=False)
    with pytest.raises(TypeError):
        group.given(parser.parse_args(["engine", "build", "m.onnx"]))


@pytest.mark.parametrize("argv", [
    ["inspect", "m.onnx"], ["lint", "m.onnx"], ["rules"], ["translate", "-i", "m.onnx"],
    ["verify", "m.onnx", "dir"], ["engine", "report", "g.json"],
    ["engine", "diff", "a.json", "b.json"],
])
def test_every_reporting_command_takes_json(argv: list[str]) -> None:
    parser = build_parser()
    assert parser.parse_args(argv).json is False
    assert parser.parse_args([*argv, "--json"]).json is True


def test_data_options() -> None:
    parser = build_parser()
    args = parser.parse_args(["verify", "m.onnx", "dir"])
    assert DataArgs().parse(args) == DataOptions(
        source=None, preprocess=None, shapes=None, batch=None, limit=None, samples=4, seed=0)
    args = parser.parse_args(["verify", "m.onnx", "dir", "--inputs", "x.npz", "--samples", "2",
                              "--seed", "7"])
    assert DataArgs().parse(args) == DataOptions(
        source="x.npz", preprocess=None, shapes=None, batch=None, limit=None, samples=2, seed=7)


@pytest.mark.parametrize("command", [
    ["verify", "m.onnx", "dir"], ["quantize", "m.onnx", "-o", "q.onnx"],
    ["fix", "m.onnx", "-o", "f.onnx"], ["compare", "f.onnx", "q.onnx"], ["profile", "m.onnx"],
])
def test_every_command_that_runs_a_model_takes_the_same_data_flags(command: list[str]) -> None:
    parser = build_parser()
    args = parser.parse_args([*command, "--data", "imgs", "--preprocess", "size=32x32",
                              "--batch", "2", "--limit", "5", "--seed", "3"])
    options = DataArgs().parse(args)
    assert (options.source, options.preprocess, options.batch, options.limit, options.seed) == (
        "imgs", "size=32x32", 2, 5, 3)
    random = DataArgs().parse(parser.parse_args(
        [*command, "--data", "random", "--shapes", "x:1x3x8x8", "--samples", "6"]))
    assert random.shapes == {"x": (1, 3, 8, 8)} and random.samples == 6


@pytest.mark.parametrize("flags, message", [
    (["--data", "x.npz", "--shapes", "x:1x3"], "--shapes sizes random inputs"),
    (["--preprocess", "size=8x8"], "--preprocess reads images"),
    (["--data", "x.npz", "--batch", "0"], "--batch must be at least 1"),
    (["--data", "random", "--shapes", "x:1xz"], "--shapes entry"),
])
def test_bad_data_flags_are_one_line_errors(flags: list[str], message: str) -> None:
    from qdqkit.core.errors import QdqkitError

    args = build_parser().parse_args(["compare", "f.onnx", "q.onnx", *flags])
    with pytest.raises(QdqkitError, match=message):
        DataArgs().parse(args)


def test_the_command_spellings_of_data_are_kept() -> None:
    parser = build_parser()
    assert parser.parse_args(["quantize", "m.onnx", "-o", "q.onnx", "--calib", "d",
                              "--calib-limit", "4"]).limit == 4
    assert parser.parse_args(["quantize", "m.onnx", "-o", "q.onnx", "--calib", "d"]).data == "d"
    assert parser.parse_args(["verify", "m.onnx", "dir", "--inputs", "x.npz"]).data == "x.npz"


def test_calibrating_commands_take_deployed_shapes_beside_real_data() -> None:
    """For quantize and fix, --shapes are the shapes the engine is judged at: they go with a
    data file (which keeps its own shapes); the request to read the file carries none."""
    from qdqkit.cli import fix_cmd, quantize_cmd

    parser = build_parser()
    for command, group in ((["quantize", "m.onnx", "-o", "q.onnx"], quantize_cmd.DATA),
                           (["fix", "q.onnx", "-o", "f.onnx"], fix_cmd.DATA)):
        options = group.parse(parser.parse_args(
            [*command, "--calib", "x.npz", "--shapes", "x:32x3x8x8"]))
        assert options.shapes == {"x": (32, 3, 8, 8)}
        assert options.request().shapes is None
