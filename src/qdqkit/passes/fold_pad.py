"""FoldPadIntoConv: merge a zero constant Pad into the Conv it feeds.

Rules:
1. ``Pad(x, pads) -> Conv`` folds when the mode is ``constant`` with value 0, the pads are constants
   touching only the spatial axes and are non-negative, the Pad output feeds only the Conv, and the
   Conv has explicit padding (``auto_pad`` NOTSET).
2. The Conv's ``pads`` become the sum and it reads ``x`` directly; the Pad disappears.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from qdqkit.core.constants import constant_array
from qdqkit.passes.scales import ScaleTable


class FoldPadIntoConv(ir.passes.InPlacePass):
    def __init__(self, scales: ScaleTable | None = None) -> None:
        super().__init__()
        self.scales = scales
        self.folded = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        for pad in list(graph):
            if pad.op_type == "Pad" and pad.domain in ("", "ai.onnx"):
                self._try_fold(graph, pad)
        return ir.passes.PassResult(model, modified=self.folded > 0)

    def _try_fold(self, graph: ir.Graph, pad: ir.Node) -> None:
        out = pad.outputs[0]
        uses = list(out.uses())
        if out.is_graph_output() or len(uses) != 1 or uses[0].idx != 0:
            return
        conv = uses[0].node
        if conv.op_type != "Conv":
            return
        mode = pad.attributes.get("mode")
        if mode is not None and mode.as_string() != "constant":
            return
        auto_pad = conv.attributes.get("auto_pad")
        if auto_pad is not None and auto_pad.as_string() not in ("NOTSET", ""):
            return
        pads = self._pads(pad)
        if pads is None or len(pads) % 2 or np.any(pads < 0):
            return
        rank = len(pads) // 2
        begins, ends = pads[:rank], pads[rank:]
        if rank < 3 or begins[0] or begins[1] or ends[0] or ends[1]:
            return
        spatial = rank - 2
        old = conv.attributes.get("pads")
        conv_pads = list(old.as_ints()) if old is not None else [0] * (2 * spatial)
        new = [conv_pads[i] + int(begins[2 + i]) for i in range(spatial)] + [
            conv_pads[spatial + i] + int(ends[2 + i]) for i in range(spatial)
        ]
        conv.attributes["pads"] = ir.AttrInt64s("pads", new)
        x = pad.inputs[0]
        assert x is not None
        conv.replace_input_with(0, x)
        if self.scales is not None:
            self.scales.discard(out)
        graph.remove(pad, safe=True)
        self.folded += 1

    @staticmethod
    def _pads(pad: ir.Node) -> np.ndarray | None:
        if len(pad.inputs) > 3 and pad.inputs[3] is not None:
            return None  # explicit axes: rare, leave it
        if len(pad.inputs) > 2 and pad.inputs[2] is not None:
            value = constant_array(pad.inputs[2])
            if value is None or np.any(np.asarray(value, dtype=np.float64) != 0):
                return None
        if "pads" in pad.attributes:  # opset < 11
            value_attr = pad.attributes.get("value")
            if value_attr is not None and value_attr.as_float() != 0.0:
                return None
            return np.asarray(pad.attributes["pads"].as_ints(), dtype=np.int64)
        if len(pad.inputs) < 2 or pad.inputs[1] is None:
            return None
        pads = constant_array(pad.inputs[1])
        return None if pads is None else np.asarray(pads, dtype=np.int64).reshape(-1)
