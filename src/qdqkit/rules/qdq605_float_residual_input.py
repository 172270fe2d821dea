"""QDQ605 (float-residual-input): a fused layer reads INT8 plus a float second input (C3, C4).

That second input is the residual (skip) tensor of a Conv+Add: the layer writes float and Q/DQ
Reformats appear around it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity

if TYPE_CHECKING:
    from qdqkit.rules.engine_context import EngineContext

RULES = (
    Rule(
        code="QDQ605",
        name="float-residual-input",
        severity=Severity.WARNING,
        summary="a fused layer reads an INT8 input and a float residual input",
        why=(
            "A Conv+Add fused layer takes its output precision from the skip input: with a float "
            "skip it writes float, and Q/DQ Reformats appear around it."
        ),
        what_to_do="Quantize the skip input with a Q/DQ pair.",
        fixable=False,
        rule_id="C3, C4",
        how_it_checks=(
            "In an INT8 engine, a compute layer whose first input is INT8 and a later input is "
            "float."
        ),
        scope="engine",
    ),
)

fix: Fix | None = None


def check(ctx: EngineContext) -> Iterator[Finding]:
    from qdqkit.trt.engine_analysis import latency_sum

    if not ctx.quantized:
        return
    mixed = [
        la for la in ctx.compute
        if la.input_precision.is_quantized and len(la.inputs) > 1
        and any(t.precision.is_float for t in la.inputs[1:])
    ]
    if mixed:
        floats = sorted({t.precision.value for la in mixed for t in la.inputs[1:]
                         if t.precision.is_float})
        yield Finding(
            code="QDQ605", severity=Severity.WARNING,
            message=f"{ctx.counted(len(mixed), 'fused layer')} with an INT8 input and a float "
            f"({'/'.join(floats)}) second input, the residual/skip tensor of a Conv+Add: such a "
            "layer writes float and needs Q/DQ Reformats around it; quantize the skip input "
            "with a Q/DQ pair",
            layers=[layer.name for layer in mixed], latency_ms=latency_sum(mixed),
        )
