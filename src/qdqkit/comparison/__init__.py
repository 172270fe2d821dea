"""``qdqkit compare``: where a Q/DQ model's error comes from, against the float model it came from.

``compare(float_model, quant_model, data)`` returns a ``CompareResult``: per quantized node its
graph-wise and layer-wise error, weight error per channel, what-if FP16 gain and engine cost; per
quantized activation its error, clipping and histogram; output-level SNR and agreement.
"""

from __future__ import annotations

from qdqkit.comparison.api import compare
from qdqkit.comparison.result import CompareResult

__all__ = ["CompareResult", "compare"]
