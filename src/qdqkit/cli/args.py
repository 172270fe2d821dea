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
from qdqkit.trt.gpus import DEFAULT_DLA, DEFAULT_GPU, default_device, find_gpu, gpu_names
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
    (see ``qdqkit.trt.versions``); the parsed value is always one of ``TRT_VERSIONS``. With
    ``from_model``, leaving it out means what ``quantize`` recorded in the model
    (``trt.build_record``): :meth:`given` is then None.
    """

    def __init__(self, applies_to: str = "", default: str = "8.6",
                 from_model: bool = False, dla_default: str | None = None) -> None:
        self.applies_to = applies_to  # e.g. " .onnx sides" when only some inputs are predicted
        self.default = default
        self.from_model = from_model
        self.dla_default = dla_default  # the version for --target dla when none is given

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        default = (f"default: the version qdqkit quantize built the model for, else {self.default}"
                   if self.from_model else f"default {self.default}")
        if self.dla_default is not None:
            default += f"; {self.dla_default} with --target dla, the last with INT8 on DLA"
        parser.add_argument(
            "--trt", default=None if self.from_model or self.dla_default else self.default,
            type=trt_version,
            metavar="{" + ",".join(TRT_VERSIONS) + "}",
            help=f"TensorRT version to predict{self.applies_to} for: 8.6 (any 8.x or 9.x), 10, "
            f"or 11 (strongly typed); 10.3 and trt10 are read as 10 ({default})",
        )

    def parse(self, args: argparse.Namespace, target: str = "gpu") -> str:
        if args.trt is not None:
            return str(args.trt)
        return self.dla_default if target == "dla" and self.dla_default else self.default

    def given(self, args: argparse.Namespace) -> str | None:
        """The version asked for, or None when left to the model's record."""
        return None if args.trt is None else str(args.trt)


class TargetArgs(ArgGroup[str]):
    """``--target gpu|dla``: the device a model's engine is predicted for (``from_model``: as
    :class:`TrtArgs`)."""

    def __init__(self, applies_to: str = "", from_model: bool = False) -> None:
        self.applies_to = applies_to
        self.from_model = from_model

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        default = ("default: the device qdqkit quantize built the model for, else gpu"
                   if self.from_model else "default gpu")
        parser.add_argument("--target", default=None if self.from_model else "gpu",
                            choices=TARGETS,
                            help=f"device to predict{self.applies_to} for ({default})")

    def parse(self, args: argparse.Namespace) -> str:
        return "gpu" if args.target is None else str(args.target)

    def given(self, args: argparse.Namespace) -> str | None:
        """The device asked for, or None when left to the model's record."""
        return None if args.target is None else str(args.target)


def recorded_settings(names: list[str]) -> str:
    """The note saying ``names`` (of "trt", "target") came from the model's quantize record."""
    what = {"trt": "the TensorRT version", "target": "the target"}
    flags = " / ".join(f"--{n}" for n in names)
    return (f"{' and '.join(what[n] for n in names)} qdqkit quantize built the model for; "
            f"{flags} to judge it for another")


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
        group.add_argument("--gpu", default=None, metavar="NAME",
                           help=f"GPU to predict latency for: {', '.join(gpu_names())} "
                           f"(default {DEFAULT_GPU}; {DEFAULT_DLA} with --target dla)")
        group.add_argument("--shapes", default=None, metavar="NAME:DIMS,...",
                           help="input shapes as trtexec spells them (input:32x3x224x224); "
                           "default: the model's, symbolic dimensions counted as 1")

    def parse(self, args: argparse.Namespace) -> LatencyOptions:
        """The device named, else the target's default (``trt.gpus.default_device``)."""
        named = args.gpu or default_device(getattr(args, "target", None) or "gpu")
        return LatencyOptions(find_gpu(str(named)).name, args.shapes)


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
    """The data a command runs a model on, as the user gave it; ``qdqkit.core.data`` reads it."""

    source: str | None  # a .npy, a .npz, a folder of them or of images, 'random', or None
    preprocess: str | None  # image preprocessing spec; ``core.data_specs.parse_preprocess`` reads it
    shapes: dict[str, tuple[int, ...]] | None  # full input shapes for random dynamic dimensions
    batch: int | None
    limit: int | None
    samples: int  # how many random samples
    seed: int

    def request(self) -> Any:
        """A ``core.data.DataRequest`` for the data, or None when none was given.

        'random' reads ``--samples`` samples (or ``--limit``).
        """
        if self.source is None:
            return None
        from qdqkit.core.data import DataRequest

        # Real data brings its own shapes: ``--shapes`` then only names the deployed ones.
        return DataRequest(self.source, batch=self.batch, limit=self.sample_limit,
                           shapes=self.shapes if self.source == "random" else None,
                           preprocess=self.preprocess_spec(), seed=self.seed)

    def request_or_random(self) -> Any:
        """:meth:`request`, or for a command that runs on random data when none is given, a
        random one: ``--shapes`` without ``--data`` then shapes it, never dropped in silence."""
        if self.source is not None or not self.shapes:
            return self.request()
        from qdqkit.core.data import DataRequest

        return DataRequest("random", batch=self.batch, limit=self.limit or self.samples,
                           shapes=self.shapes, seed=self.seed)

    @property
    def sample_limit(self) -> int | None:
        """How many samples to read: ``--limit``, or for 'random' data ``--samples``."""
        return self.limit if self.source != "random" else (self.limit or self.samples)

    def preprocess_spec(self) -> Any:
        """The parsed ``--preprocess`` (a ``core.images.Preprocess``), or None."""
        if self.preprocess is None:
            return None
        from qdqkit.core.data_specs import parse_preprocess

        return parse_preprocess(self.preprocess)


class DataArgs(ArgGroup[DataOptions]):
    """``--data DATA``, ``--preprocess``, ``--shapes``, ``--batch``, ``--limit``, ``--samples``,
    ``--seed``: the data a model is run on, with the same flags in every command that runs one
    (``verify``, ``quantize``, ``fix``, ``compare``, ``profile``).

    ``aliases`` keep a command's own spelling of ``--data`` (``quantize --calib``,
    ``verify --inputs``); ``limit_alias`` likewise (``--calib-limit``). ``deployed_shapes``:
    ``--shapes`` are also the shapes the command judges the engine at, so they go with real
    data too (whose own shapes stay as they are).
    """

    def __init__(self, *, samples: int = 4, aliases: Sequence[str] = (),
                 limit_alias: str | None = None, title: str = "input data",
                 deployed_shapes: bool = False) -> None:
        self.samples = samples
        self.aliases = tuple(aliases)
        self.limit_alias = limit_alias
        self.title = title
        self.deployed_shapes = deployed_shapes

    @classmethod
    def calibration(cls, title: str = "calibration data") -> DataArgs:
        """The group of the commands that calibrate and judge which INT8 regions pay
        (``quantize``, ``fix``): ``--calib`` and ``--calib-limit`` spell ``--data`` and
        ``--limit``; 8 random samples by default; ``--shapes`` are the deployed shapes."""
        return cls(samples=8, aliases=("--calib",), limit_alias="--calib-limit", title=title,
                   deployed_shapes=True)

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group(self.title)
        group.add_argument("--data", *self.aliases, dest="data", metavar="DATA",
                           help=".npy (one input, samples on axis 0), .npz (one array per input), "
                           "a folder of them or of images (with --preprocess), or 'random' "
                           "(seeded samples sized and ranged from the model)")
        group.add_argument("--preprocess", metavar="SPEC",
                           help="images: 'size=224x224,mean=0.485/0.456/0.406,std=0.229/0.224/"
                           "0.225,order=RGB,layout=NCHW,scale=1/255' (every key optional; size is height x "
                           "width, by default the model's)")
        group.add_argument("--shapes", action="append", default=[], metavar="SHAPES",
                           help=("the input shapes you deploy, trtexec's spelling: "
                                 "name:32x3x640x640,other:32x10; the engine is predicted and "
                                 "which INT8 regions pay is judged at them (default: the "
                                 "calibration data's first batch), and random inputs take them"
                                 if self.deployed_shapes else
                                 "shapes of random inputs with dynamic dimensions, trtexec's "
                                 "spelling: name:1x3x640x640,other:1x10"))
        group.add_argument("--batch", type=int, metavar="N",
                           help="samples per inference (default: the model's batch, else 1)")
        limit = ["--limit", *([self.limit_alias] if self.limit_alias else [])]
        group.add_argument(*limit, dest="limit", type=int, metavar="N",
                           help="use at most N samples of the data")
        group.add_argument("--samples", type=int, default=self.samples, metavar="N",
                           help=f"random samples (default {self.samples})")
        group.add_argument("--seed", type=int, default=0, metavar="S",
                           help="seed of the random samples (default 0)")

    def parse(self, args: argparse.Namespace) -> DataOptions:
        from qdqkit.core.shape_spec import parse_shapes

        shapes = parse_shapes(args.shapes) or None
        source = args.data
        if shapes and source not in (None, "random") and not self.deployed_shapes:
            raise QdqkitError("--shapes sizes random inputs; a data file brings its own shapes")
        if args.preprocess and source in (None, "random"):
            raise QdqkitError("--preprocess reads images: give a folder of them with --data")
        for flag, value in (("--batch", args.batch), ("--limit", args.limit),
                            ("--samples", args.samples)):
            if value is not None and value < 1:
                raise QdqkitError(f"{flag} must be at least 1, not {value}")
        return DataOptions(source=source, preprocess=args.preprocess, shapes=shapes,
                           batch=args.batch, limit=args.limit, samples=int(args.samples),
                           seed=int(args.seed))


def add_groups(parser: argparse.ArgumentParser, *groups: ArgGroup[Any]) -> None:
    for group in groups:
        group.add_to(parser)
