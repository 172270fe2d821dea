"""``build_engine(model)``: run ``trtexec`` with the export flags, then read what it wrote.

This needs TensorRT's ``trtexec`` (and a GPU); without it the command says what to install and
stops. The flags differ by version:

1. TensorRT 8.2+ has ``--exportLayerInfo``, ``--exportProfile`` and
   ``--profilingVerbosity=detailed``; older versions cannot export the layer JSON at all.
2. TensorRT 8.x-10.x take ``--int8``/``--fp16``/``--best``; TensorRT 11 removed them (networks
   are strongly typed: precision comes from Q/DQ nodes and tensor types), so they are dropped with
   a note. ``--stronglyTyped`` exists from TensorRT 10 and is implied in 11.
3. Which flags exist is read from ``trtexec --help`` when it lists them, else from the version in
   trtexec's banner (``[TensorRT v8601]``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from qdqkit.core.atomic import output_set, write_text_atomic
from qdqkit.core.errors import QdqkitError, ToolNotFoundError
from qdqkit.trt.engine import EngineGraph

_BANNER = re.compile(r"TensorRT v(\d{4,6})")
_PRECISION_FLAGS = {"int8": "--int8", "fp16": "--fp16", "best": "--best",
                    "strongly-typed": "--stronglyTyped"}
INSTALL_HINT = (
    "install TensorRT (NVIDIA's tensorrt Debian/RPM/tar package, or the nvcr.io/nvidia/tensorrt "
    "container) and put the folder holding trtexec on PATH; report, draw and diff need only the "
    "JSON files trtexec writes, so they also work on files built elsewhere"
)


class EngineBuildError(QdqkitError):
    """trtexec is present but cannot build what was asked."""


@dataclass
class Trtexec:
    path: str
    version: tuple[int, int, int] | None
    help_flags: frozenset[str] = frozenset()  # flags ``trtexec --help`` lists (empty: unknown)

    def accepts(self, flag: str) -> bool:
        if self.help_flags:
            return flag in self.help_flags
        major = self.version[0] if self.version else 10
        if flag in ("--int8", "--fp16", "--best"):
            return major < 11
        if flag == "--stronglyTyped":
            return major >= 10
        return True

    @property
    def version_text(self) -> str:
        return ".".join(map(str, self.version)) if self.version else "unknown version"


@dataclass
class BuiltEngine:
    command: list[str]
    files: list[Path]
    graph: EngineGraph
    notes: list[str] = field(default_factory=list)


def parse_trt_version(text: str) -> tuple[int, int, int] | None:
    """``[TensorRT v8601]`` -> (8, 6, 1); ``v100300`` -> (10, 3, 0)."""
    match = _BANNER.search(text)
    if not match:
        return None
    number = int(match.group(1))
    if number >= 10000:  # TensorRT 10+: MMmmpp
        return number // 10000, (number // 100) % 100, number % 100
    return number // 1000, (number // 100) % 10, number % 100  # 8.x: Mmpp


def find_trtexec() -> str:
    found = shutil.which("trtexec")
    if found is None:
        raise ToolNotFoundError(f"trtexec is not on PATH: {INSTALL_HINT}")
    return found


def probe_trtexec(path: str) -> Trtexec:
    try:
        proc = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolNotFoundError(f"{path} does not run ({exc}); {INSTALL_HINT}") from None
    text = proc.stdout + proc.stderr
    flags = frozenset(re.findall(r"(--[A-Za-z][A-Za-z0-9]*)", text))
    # A help text that does not list the export flag is not one we can trust for flag checks.
    return Trtexec(path, parse_trt_version(text), flags if "--exportLayerInfo" in flags else frozenset())


def build_command(
    trtexec: Trtexec, model: Path, stem: Path, precision: str | None, extra_args: list[str]
) -> tuple[list[str], list[str]]:
    """The trtexec command line and notes about flags left out. ``stem`` + suffixes are outputs."""
    version = trtexec.version
    if version is not None and version < (8, 2, 0):
        raise EngineBuildError(
            f"trtexec is TensorRT {trtexec.version_text}; --exportLayerInfo needs TensorRT 8.2 "
            "or newer: install a newer TensorRT"
        )
    command = [
        trtexec.path, f"--onnx={model}", f"--saveEngine={stem}.engine",
        f"--exportLayerInfo={stem}.graph.json", f"--exportProfile={stem}.profile.json",
        "--profilingVerbosity=detailed",
    ]
    if trtexec.accepts("--exportTimes"):
        command.append(f"--exportTimes={stem}.times.json")
    if trtexec.accepts("--separateProfileRun"):
        # Profile in a run of its own so the end-to-end timing is not slowed by profiling.
        command.append("--separateProfileRun")
    notes = []
    if precision is not None:
        flag = _PRECISION_FLAGS[precision]
        if trtexec.accepts(flag):
            command.append(flag)
        elif flag == "--stronglyTyped" and (version is None or version[0] < 11):
            raise EngineBuildError(
                f"trtexec (TensorRT {trtexec.version_text}) has no --stronglyTyped; it arrived "
                "in TensorRT 10: use --int8/--best or install TensorRT 10+"
            )
        else:
            notes.append(
                f"TensorRT {trtexec.version_text} has no {flag}: networks are strongly typed, so "
                "precision comes from the model's Q/DQ nodes and tensor types; built without it"
            )
    return command + list(extra_args), notes


def build_engine(
    model: Path, precision: str | None = None, output_dir: Path | None = None,
    extra_args: list[str] | None = None,
) -> BuiltEngine:
    """Build ``model`` with trtexec, publish the engine and its exports together, read them."""
    from qdqkit.trt.engine_json import read_engine_graph

    model = Path(model)
    if not model.is_file():
        raise EngineBuildError(f"{model}: no such model file")
    trtexec = probe_trtexec(find_trtexec())
    out_dir = Path(output_dir) if output_dir else model.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    name = model.name.removesuffix(".onnx")
    suffixes = (".engine", ".graph.json", ".profile.json", ".times.json")
    with tempfile.TemporaryDirectory(prefix=".qdqkit-build-", dir=out_dir) as tmp:
        command, notes = build_command(trtexec, model.resolve(), Path(tmp) / name, precision,
                                       extra_args or [])
        proc = subprocess.run(command, capture_output=True, text=True)
        log = proc.stdout + proc.stderr
        log_path = out_dir / f"{name}.trtexec.log"
        if proc.returncode != 0:
            write_text_atomic(log_path, log, protected=(model,))
            errors = [line for line in log.splitlines() if "[E]" in line or "Error" in line]
            last = errors[-1].strip() if errors else "no error line in its output"
            raise EngineBuildError(
                f"trtexec failed (exit {proc.returncode}) on {model}: {last}; full log in {log_path}"
            )
        with output_set(protected=(model,)) as out:
            for suffix in suffixes:
                produced = Path(tmp) / f"{name}{suffix}"
                if produced.exists():
                    out.stage_bytes(out_dir / f"{name}{suffix}", produced.read_bytes())
            out.stage_text(log_path, log)
    files = [out_dir / f"{name}{s}" for s in suffixes if (out_dir / f"{name}{s}").exists()]
    graph = read_engine_graph(out_dir / f"{name}.graph.json", profile=out_dir / f"{name}.profile.json",
                              timing=log_path)
    return BuiltEngine([c.replace(tmp, str(out_dir)) for c in command], [*files, log_path],
                       graph, notes)
