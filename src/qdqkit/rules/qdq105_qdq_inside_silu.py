"""QDQ105: Q/DQ anywhere inside Conv -> Sigmoid -> Mul (SiLU), which then cannot fuse (C7).

The Mul reads x and Sigmoid(x), each possibly through one DQ(Q(.)) pair, where x comes from a
weighted op, a BatchNorm or an Add; any pair on the way is reported with the SiLU's nodes.
Not for DLA: its implicit build takes each pair as a tensor's range, which cuts no fusion, and
the SiLU's inner tensors need their own there (I1, I2).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity, replace_by_placement

if TYPE_CHECKING:

    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ105",
        name="qdq-inside-silu",
        severity=Severity.ERROR,
        summary="Q/DQ inside Conv -> Sigmoid -> Mul (SiLU/Swish)",
        why=(
            "Conv+Sigmoid+Mul fuses into the conv epilogue only without Q/DQ inside; with them, "
            "the conv writes INT8, Sigmoid and Mul run as a separate pointwise layer with "
            "Reformats."
        ),
        what_to_do=(
            "Remove the Q/DQ between the conv and Sigmoid/Mul; quantize the Mul's output "
            "consumers."
        ),
        fixable=True,
        rule_id="C7",
        how_it_checks=(
            "A conv-chain output reaches Sigmoid and Mul(x, sigmoid(x)) where either path passes "
            "a Q/DQ."
        ),
    ),
)


# DLA builds implicitly: a pair there is a range, which cuts no fusion (I1, I2).
TARGETS = ("gpu",)

fix: Fix | None = replace_by_placement


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.qdq import node_label
    from qdqkit.trt.predict.ops import is_add, is_default_domain

    weighted = set(ctx.view.weighted_nodes)
    for node in ctx.nodes_of("Mul"):
        if len(node.inputs) != 2 or not is_default_domain(node):
            continue
        (a, qa), (b, qb) = (ctx.unwrap_qdq(v) for v in node.inputs)
        for sig_side, other, q_sig, q_other in ((a, b, qa, qb), (b, a, qb, qa)):
            sig = sig_side.producer() if sig_side is not None else None
            if sig is None or sig.op_type != "Sigmoid":
                continue
            base, q_in = ctx.unwrap_qdq(sig.inputs[0])
            if base is None or base is not other:
                continue
            producer = base.producer()
            if producer is None or (producer not in weighted and producer.op_type != (
                    "BatchNormalization") and not is_add(producer)):
                continue
            inside = q_sig + q_other + q_in
            if inside:
                names = sorted({node_label(n) for n in inside})
                yield ctx.finding(
                    "QDQ105", f"SiLU '{node_label(sig)}'/'{node_label(node)}' after "
                    f"'{node_label(producer)}' has Q/DQ inside ({', '.join(names)})",
                    nodes=[*names, node_label(sig), node_label(node)], tensors=[base.name or ""],
                    cost="Sigmoid/Mul run as a separate pointwise layer; the conv epilogue is lost",
                )
            break
