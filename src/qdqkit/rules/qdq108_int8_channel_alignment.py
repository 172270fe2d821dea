"""QDQ108: an INT8 convolution whose channels are not a multiple of 32 (F1, F2, F3, E4).

1. Input or output channels above 4 and not a multiple of 32 waste CHW32 work or fall back to
   CHW4 kernels (the image stem, 4 channels or fewer, is exempt).
2. A grouped (not depthwise) conv also needs channels per group to be a multiple of 4 (F2).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity

if TYPE_CHECKING:
    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ108",
        name="int8-channel-alignment",
        severity=Severity.WARNING,
        summary="an INT8 convolution's channel count is not a multiple of 32",
        why=(
            "INT8 tensor-core kernels use 32-wide channel vectors (CHW32): other counts are "
            "padded (wasted MACs) or served by slower CHW4 kernels, with Reformats between the "
            "two layouts."
        ),
        what_to_do="Pad the channel count to a multiple of 32 (e.g. 72 -> 96) or accept the cost.",
        fixable=False,
        rule_id="F1, F3, E4",
        how_it_checks=(
            "For each INT8 conv, input or output channels % 32 != 0 (input channels <= 4, the "
            "image stem, are exempt: CHW4 is native there); grouped convs also need channels per "
            "group % 4 == 0 (F2)."
        ),
    ),
)

fix: Fix | None = None


def check(ctx: LintContext) -> Iterator[Finding]:
    import math

    from qdqkit.core.qdq import node_label

    prediction = ctx.prediction
    for block in prediction.blocks:
        node, ref = block.weighted, block.weight
        layer = prediction.block_layer(block)
        if node is None or ref is None or node.op_type != "Conv" or layer is None:
            continue
        cost = prediction.cost_of(layer)
        stored = prediction.shape_of(ref.source)
        if cost is None or not cost.int8_compute or stored is None:
            continue
        shape = [d for d in stored if isinstance(d, int)]
        if len(shape) < 2:
            continue
        group_attr = node.attributes.get("group")
        group = group_attr.as_int() if group_attr is not None else 1
        cout, cin = shape[0], shape[1] * group
        if group > 1 and group == cin == cout:
            continue  # depthwise: its own kernels
        odd = [(what, c) for what, c in (("input", cin), ("output", cout)) if c > 4 and c % 32]
        if group > 1 and (shape[1] % 4 or (cout // group) % 4):
            odd.append(("per-group", shape[1]))
        if not odd:
            continue
        what, channels = odd[0]
        padded = math.ceil(channels / 32) * 32
        waste = 1 - channels / padded
        yield ctx.finding(
            "QDQ108", f"{node.op_type} '{node_label(node)}': {channels} {what} channels",
            nodes=[node_label(node)],
            cost=f"CHW32 pads {channels} -> {padded} ({waste:.0%} of the INT8 work wasted) or "
            "CHW4 kernels with a layout Reformat",
        )
