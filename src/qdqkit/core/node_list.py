"""Lists of node names in a text file: one name, glob or op type per line; ``#`` lines comment.

``compare --fallback`` writes such a list (the nodes worth running in float, best first);
``quantize --exclude-from`` reads it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from qdqkit.core.errors import QdqkitError


def read_node_list(path: str | os.PathLike[str]) -> list[str]:
    """The entries of the list at ``path``, in order, without comments and blank lines."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise QdqkitError(f"{file}: no such node list") from None
    except UnicodeDecodeError:
        raise QdqkitError(f"{file}: not a text file of node names (one per line)") from None
    except OSError as exc:
        raise QdqkitError(f"{file}: cannot read it: {exc.strerror or exc}") from None
    names = []
    for line in text.splitlines():
        entry = line.strip()  # a node name may hold '#': only a line starting with it is a comment
        if entry and not entry.startswith("#"):
            names.append(entry)
    return names


def read_node_lists(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """The entries of every list in ``paths``, one after the other (a repeatable flag's files)."""
    return [name for path in paths for name in read_node_list(path)]
