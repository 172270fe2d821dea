"""The ``qdqkit`` command line: parse arguments, call one API function, render its result.

Each command lives in its own ``*_cmd`` module with a ``register(subparsers)`` function; flags that
several commands share are declared once as argument groups in ``args``, and results are rendered
through ``qdqkit.report`` (text, JSON, HTML). Building the parser imports only argparse and these
small modules: the command's own imports (onnx, onnx-ir, onnxruntime, numpy) happen when it runs,
so ``qdqkit --help``, ``qdqkit rules`` and ``qdqkit engine report|draw|diff`` on JSON files start
instantly (``tests/cli/test_startup.py`` checks which modules each one loads).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from qdqkit import __version__
from qdqkit.core.errors import QdqkitError

# One line per command module; the order is the order ``qdqkit --help`` lists them.
COMMAND_MODULES = (
    "qdqkit.cli.inspect_cmd",
    "qdqkit.cli.lint_cmd",
    "qdqkit.cli.rules_cmd",
    "qdqkit.cli.translate_cmd",
    "qdqkit.cli.verify_cmd",
    "qdqkit.cli.quantize_cmd",
    "qdqkit.cli.fix_cmd",
    "qdqkit.cli.compare_cmd",
    "qdqkit.cli.profile_cmd",
    "qdqkit.cli.demo_cmd",
    "qdqkit.cli.engine_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qdqkit",
        description="Get ONNX models into fast, accurate INT8 on NVIDIA TensorRT, without a GPU.",
    )
    parser.add_argument("--version", action="version", version=f"qdqkit {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; without ``argv`` (the ``qdqkit`` script, ``python -m qdqkit``) it is the
    process's entry point, and the graphs a command leaves are reclaimed by the exit."""
    if argv is None:
        from qdqkit.core.gc_pause import leave_graphs_to_process_exit

        leave_graphs_to_process_exit()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.run(args) or 0)
    except QdqkitError as exc:
        print(f"qdqkit: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # the reader of our output went away (e.g. `| head`)
        return 0
    except OSError as exc:
        # A file system refusal (permissions, a full disk) is the user's environment, not a bug.
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"qdqkit: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("qdqkit: interrupted", file=sys.stderr)
        return 130
