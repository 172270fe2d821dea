"""Translate Q/DQ models for TensorRT implicit INT8 (DLA, TensorRT <= 10): see ``api``."""

from __future__ import annotations

from qdqkit.translation.api import (
    TranslateOptions,
    TranslateResult,
    Translation,
    translate,
    translate_model,
)

__all__ = ["TranslateOptions", "TranslateResult", "Translation", "translate", "translate_model"]
