"""The one error type users see.

Every message says what is wrong with *their* input (naming the file, node or tensor) and what to do.
The CLI prints it on one line without a traceback and exits 2.
"""

from __future__ import annotations


class QdqkitError(Exception):
    """A problem with the user's input or environment, explained in one line."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        # Collapse newlines: the CLI promises a one-line error.
        super().__init__(" ".join(message.split()))

    @property
    def message(self) -> str:
        return str(self)


class ModelLoadError(QdqkitError):
    """The model file cannot be read, parsed or trusted."""


class UnsupportedModelError(QdqkitError):
    """The model is readable but uses something this command cannot handle."""


class OutputError(QdqkitError):
    """An output cannot be written where the user asked."""


class EngineFileError(QdqkitError):
    """A TensorRT engine export (layer info or profile JSON) is malformed."""


class ToolNotFoundError(QdqkitError):
    """An external program the command needs is not installed."""
