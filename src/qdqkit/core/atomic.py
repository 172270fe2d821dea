"""Atomic, all-or-nothing output.

A command's outputs appear together or not at all: each file is written to a hidden temporary name in
its destination folder and renamed into place only when every file of the set is complete. On any
error, and on SIGTERM, the temporaries are removed, so a failed or killed run leaves nothing
half-written behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from qdqkit.core.errors import OutputError


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


class OutputSet:
    """Stage several output files and publish them together.

    ``protected`` paths (the command's inputs) may never be overwritten.
    """

    def __init__(self, protected: tuple[Path, ...] = ()) -> None:
        self._protected = tuple(Path(p).resolve() for p in protected)
        self._staged: list[tuple[Path, Path]] = []

    def _check_target(self, target: Path) -> None:
        resolved = target.resolve()
        for p in self._protected:
            if resolved == p or _same_file(resolved, p):
                raise OutputError(
                    f"{target}: this output would overwrite the input {p}; "
                    "write it to another path"
                )
        if any(dest == resolved for _, dest in self._staged):
            raise OutputError(
                f"{target}: two outputs of this run have the same path; "
                "give the inputs different file names"
            )

    def _temp_for(self, target: Path) -> Path:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        except OSError as exc:
            raise OutputError(
                f"{target.parent}: cannot write outputs there ({exc.strerror or exc}); "
                "choose a folder you can write to"
            ) from None
        os.close(fd)
        # mkstemp makes owner-only files; published outputs get the mode any new file would get.
        os.chmod(tmp, 0o666 & ~_current_umask())
        return Path(tmp)

    def stage_writer(self, target: Path, write: Callable[[Path], None]) -> None:
        """Stage ``target`` by calling ``write(temp_path)``."""
        target = Path(target)
        self._check_target(target)
        tmp = self._temp_for(target)
        self._staged.append((tmp, target.resolve()))
        write(tmp)

    def stage_bytes(self, target: Path, data: bytes) -> None:
        def write(tmp: Path) -> None:
            tmp.write_bytes(data)

        self.stage_writer(Path(target), write)

    def stage_text(self, target: Path, text: str) -> None:
        self.stage_bytes(Path(target), text.encode("utf-8"))

    def commit(self) -> list[Path]:
        published = []
        for tmp, dest in self._staged:
            os.replace(tmp, dest)
            published.append(dest)
        self._staged.clear()
        return published

    def discard(self) -> None:
        for tmp, _ in self._staged:
            with contextlib.suppress(OSError):
                tmp.unlink()
        self._staged.clear()


class Terminated(BaseException):
    """SIGTERM arrived while outputs were being written (raised so they are cleaned up)."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """Turn SIGTERM into an exception while staging, so temporaries are removed, then re-send it.

    Only the main thread can install handlers; elsewhere the default behaviour stays.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    except Terminated:
        signal.signal(signal.SIGTERM, previous)
        # The process was asked to end: end it the way the sender expects, after cleaning up.
        os.kill(os.getpid(), signal.SIGTERM)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def output_set(protected: tuple[Path, ...] = ()) -> Iterator[OutputSet]:
    """Context manager: publish all staged files on success, remove them all on error.

    SIGTERM while staging removes the temporaries too, then ends the process as SIGTERM would.
    """
    outputs = OutputSet(protected)
    with _sigterm_raises():
        try:
            yield outputs
        except BaseException:
            outputs.discard()
            raise
        outputs.commit()


def write_text_atomic(path: Path, text: str, protected: tuple[Path, ...] = ()) -> Path:
    with output_set(protected) as out:
        out.stage_text(Path(path), text)
    return Path(path).resolve()
