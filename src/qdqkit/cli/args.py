"""Argument groups: each flag that several commands take is declared once, here.

A group adds its arguments to a command's parser and turns the parsed namespace back into typed
options (the model is Polygraphy's ``tools/args``). So ``--trt`` accepts the same spellings in
``lint`` and ``engine diff``, ``-o`` is ``-o/--output`` everywhere, and the data options that
``verify`` takes today are the ones ``quantize`` and ``compare`` will take.

Only argparse and ``qdqkit.trt.versions`` are imported: building the parser must stay instant.
"""

from __future__ import annotations

import argparse
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from qdqkit.core.errors import QdqkitError
from qdqkit.trt.gpus import DEFAULT_GPU, find_gpu, gpu_names
from qdqkit.trt.versions import TARGETS, TRT_VERSIONS, normalize_trt_version

Options = TypeVar("Options")


class ArgGroup(ABC, Generic[Options]):
    """One set of related flags: ``add_to`` a parser, then ``parse`` the namespace it returns."""

    @abstractmethod
    def add_to(self, parser: argparse.ArgumentParser) -> None: ...

    @abstractmethod
    def parse(self, args: argparse.Namespace) -> Options: ...


def trt_version(text: str) -> str:
    """argparse ``type`` for ``--trt``: the normalized version, or argparse's usage error."""
    try:
        return normalize_trt_version(text)
    except QdqkitError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class TrtArgs(ArgGroup[str]):
    """``--trt VERSION``: the TensorRT version a model's engine is predicted for.

    Accepts ``8.6``, ``10``, ``11`` and spellings such as ``8``, ``8.6.1``, ``10.3``, ``trt10``
    (see ``qdqkit.trt.versions``); the parsed value is always one of ``TRT_VERSIONS``.
    """

    def __init__(self, applies_to: str = "", default: str = "8.6") -> None:
        self.applies_to = applies_to  # e.g. " .onnx sides" when only some inputs are predicted
        self.default = default

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--trt", default=self.default, type=trt_version,
            metavar="{" + ",".join(TRT_VERSIONS) + "}",
            help=f"TensorRT version to predict{self.applies_to} for: 8.6 (any 8.x or 9.x), 10, "
            f"or 11 (strongly typed); 10.3 and trt10 are read as 10 (default {self.default})",
        )

    def parse(self, args: argparse.Namespace) -> str:
        return str(args.trt)


class TargetArgs(ArgGroup[str]):
    """``--target gpu|dla``: the device a model's engine is predicted for."""

    def __init__(self, applies_to: str = "") -> None:
        self.applies_to = applies_to

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--target", default="gpu", choices=TARGETS,
                            help=f"device to predict{self.applies_to} for (default gpu)")

    def parse(self, args: argparse.Namespace) -> str:
        return str(args.target)


class JsonArgs(ArgGroup[bool]):
    """``--json``: print the result for machines (``qdqkit.report.json_output``) instead of text."""

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="print the result as JSON")

    def parse(self, args: argparse.Namespace) -> bool:
        return bool(args.json)


@dataclass(frozen=True)
class LatencyOptions:
    gpu: str
    shapes: str | None  # trtexec's spelling, "input:32x3x224x224,mask:32x128"


class LatencyArgs(ArgGroup[LatencyOptions]):
    """``--gpu NAME`` and ``--shapes``: what the latency cost model times an engine on and with."""

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group("latency")
        group.add_argument("--gpu", default=DEFAULT_GPU, metavar="NAME",
                           help=f"GPU to predict latency for: {', '.join(gpu_names())} "
                           f"(default {DEFAULT_GPU})")
        group.add_argument("--shapes", default=None, metavar="NAME:DIMS,...",
                           help="input shapes as trtexec spells them (input:32x3x224x224); "
                           "default: the model's, symbolic dimensions counted as 1")

    def parse(self, args: argparse.Namespace) -> LatencyOptions:
        return LatencyOptions(find_gpu(str(args.gpu)).name, args.shapes)


class OutputArgs(ArgGroup[str | None]):
    """``-o/--output PATH``: where a command writes (a file or a folder, as the command says).

    ``aliases`` keep older spellings working (translate's ``--output_dir``). The path is returned as
    typed, so messages echo the user's own spelling.
    """

    def __init__(self, help: str, *, folder: bool = False, required: bool = False,
                 default: str | None = None, aliases: Sequence[str] = ()) -> None:
        self.help, self.folder, self.required = help, folder, required
        self.default, self.aliases = default, tuple(aliases)

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-o", "--output", *self.aliases, dest="output", required=self.required,
                            default=self.default, metavar="DIR" if self.folder else "FILE",
                            help=self.help)

    def parse(self, args: argparse.Namespace) -> str | None:
        return None if args.output is None else str(args.output)

    def given(self, args: argparse.Namespace) -> str:
        """The path of a group that is required or has a default, so it is always there."""
        path = self.parse(args)
        if path is None:
            raise TypeError("OutputArgs.given() needs required=True or a default")
        return path


@dataclass(frozen=True)
class DataOptions:
    """Where the values fed to a model come from: a file, else seeded random samples."""

    inputs: str | None  # .npz with one array per model input (optionally a leading sample axis)
    samples: int
    seed: int


class DataArgs(ArgGroup[DataOptions]):
    """``--inputs FILE``, ``--samples N``, ``--seed S``: the data a model is run on.

    One group for every command that runs a model on data (verify today; quantize and compare
    next), so ``--shapes`` and ``--calib``/``--data`` are added here, once, when they come.
    """

    def __init__(self, samples: int = 4) -> None:
        self.samples = samples

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group("input data")
        group.add_argument("--inputs", metavar="FILE",
                           help=".npz with one array per model input (optional)")
        group.add_argument("--samples", type=int, default=self.samples, metavar="N",
                           help=f"random samples (default {self.samples})")
        group.add_argument("--seed", type=int, default=0, metavar="S",
                           help="seed of the random inputs (default 0)")

    def parse(self, args: argparse.Namespace) -> DataOptions:
        return DataOptions(inputs=args.inputs, samples=int(args.samples), seed=int(args.seed))


@dataclass(frozen=True)
class CalibOptions:
    """Calibration data as the user gave it; ``qdqkit.core.data.open_data`` reads it."""

    calib: str | None
    preprocess: str | None
    shapes: str | None
    batch: int | None
    limit: int | None
    seed: int


class CalibArgs(ArgGroup[CalibOptions]):
    """``--calib DATA``, ``--preprocess SPEC``, ``--shapes SPEC``, ``--batch N``, ``--calib-limit N``.

    The calibration data of ``quantize`` (and ``compare`` next): a .npy, a .npz, a folder of
    them or of images, or ``random``. Specs stay strings here; ``qdqkit.core.data_specs`` parses
    them, so building the parser imports nothing heavy.
    """

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group("calibration data")
        group.add_argument("--calib", metavar="DATA",
                           help=".npy (one input, samples on axis 0), .npz (keys = input names), a "
                           "folder of them or of images (with --preprocess), or 'random' "
                           "(meaningless scales, recorded as such)")
        group.add_argument("--preprocess", metavar="SPEC",
                           help="image preprocessing, e.g. 'size=224x224,mean=0.485/0.456/0.406,"
                           "std=0.229/0.224/0.225,order=RGB,layout=NCHW,scale=1/255'")
        group.add_argument("--shapes", metavar="SPEC",
                           help="input shapes for random data with dynamic dimensions, e.g. "
                           "'images:1x3x640x640'")
        group.add_argument("--batch", type=int, metavar="N",
                           help="samples per inference (default: the model's batch, else 1)")
        group.add_argument("--calib-limit", type=int, metavar="N",
                           help="use at most N samples")
        group.add_argument("--seed", type=int, default=0, metavar="S",
                           help="seed of random data (default 0)")

    def parse(self, args: argparse.Namespace) -> CalibOptions:
        return CalibOptions(args.calib, args.preprocess, args.shapes, args.batch,
                            args.calib_limit, int(args.seed))


def add_groups(parser: argparse.ArgumentParser, *groups: ArgGroup[Any]) -> None:
    for group in groups:
        group.add_to(parser)
