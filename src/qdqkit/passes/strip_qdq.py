"""StripQdqPairs: remove every QuantizeLinear/DequantizeLinear, keeping activation scales aside.

Rules:
1. ``x -> Q -> DQ(s) -> ...``: every use of each DQ output reads ``x`` instead; if ``x`` is not a
   constant, its scale ``s`` is recorded in the scale table (a float weight simply stays float:
   TensorRT quantizes it again); an explicit uint8 zero point of 0 records ``s * 255 / 127``, the
   int8 scale with the same amax.
   A constant (or a Reshape, Transpose and the like of constants) that reaches no weighted op's
   input through such ops, as a BatchNormalization scale or an Add's bias onnxruntime quantizes,
   is one TensorRT never quantizes: its readers read the values the Q/DQ pair gives instead, the
   Q/DQ model's numbers. With ``dequantize_float_layer_weights`` (translation), so does the
   weight of a layer that reads no quantized activation (a Conv after an unquantized Mul): that
   layer runs FP16, where TensorRT computes with the weight as given, and the Q/DQ model
   computes with the dequantized one; and so does each weight in ``dequantized_weights``.
2. ``int8/int32 constant -> DQ``: the DQ is folded into a float initializer ``(q - zp) * scale``;
   ``graph input -> DQ``: the input becomes a float input carrying the DQ's scale.
3. A DQ output that is a graph output keeps its name: ``x`` is renamed to it, or an Identity is
   inserted when ``x`` is itself a graph input or output.
4. A pair that also converts (a Q reading float32, its DQ writing float16, as a network input's
   Q moved in front of its Cast leaves it) becomes a Cast to the DQ's type, which carries the
   scale too; its readers keep the type they were made for.

The caller has already refused what implicit INT8 cannot carry (see ``translation.refusals``).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from qdqkit.core.constants import constant_array, constant_source
from qdqkit.core.names import taken_names, unique_name
from qdqkit.core.qdq import WEIGHT_PATH_OPS, WEIGHTED_OPS, QdqView, is_quantize, node_label
from qdqkit.core.qdq_math import dequantize, quantize
from qdqkit.core.value_types import set_dtype
from qdqkit.passes.fold_weight_path import evaluate_constant
from qdqkit.passes.node_removal import remove_together
from qdqkit.passes.scales import ScaleOrigin, ScaleTable

# Readers that only look at a tensor's shape: quantizing the tensor changes nothing for them.
_SHAPE_ONLY_READERS = frozenset({"Shape", "Size"})


def dequantized_array(view: QdqView, dq: ir.Node, out_dtype: np.dtype) -> np.ndarray:
    """The float value a constant-input DQ produces, rounded once to ``out_dtype``."""
    params = view.params(dq)
    data = constant_array(dq.inputs[0])
    if params is None or data is None:
        raise ValueError(f"DequantizeLinear {node_label(dq)} has no constant input")
    return dequantize(data, params, out_dtype)


def _int8_layer(node: ir.Node, view: QdqView, constants: set[ir.Value]) -> bool:
    """Whether weighted ``node`` reads every activation input (an input not computed from
    constants) through a Q/DQ pair, or from a graph input's DQ: the layer TensorRT runs INT8."""
    activations = [v for v in node.inputs
                   if v is not None and constant_source(v) is None and v not in constants]
    for value in activations:
        producer = value.producer()
        if producer is None or producer.op_type != "DequantizeLinear":
            return False
        source = producer.inputs[0]
        if source is None or (view.quantize_of(producer) is None and not source.is_graph_input()):
            return False
    return bool(activations)


def _weight_of_int8_layer(
    value: ir.Value, view: QdqView, constants: set[ir.Value], any_layer: bool = False
) -> bool:
    """Whether ``value`` reaches the weight input of a weighted op TensorRT runs INT8 (with
    ``any_layer``, of any weighted op), directly or through weight-path ops (rule 1: else its
    readers take the dequantized values)."""
    pending, seen = [value], {value}
    while pending:
        for use in pending.pop().uses():
            node = use.node
            if node.op_type in WEIGHTED_OPS and (any_layer or _int8_layer(node, view, constants)):
                return True
            if node.op_type in WEIGHT_PATH_OPS:
                for out in node.outputs:
                    if out not in seen:
                        seen.add(out)
                        pending.append(out)
    return False


def _quantized_constant(view: QdqView, q: ir.Node, dq: ir.Node) -> np.ndarray | None:
    """What ``DQ(Q(constant))`` computes (rule 1), or None when a parameter is not constant."""
    params, data = view.params(q), evaluate_constant(q.inputs[0])
    dq_params = view.params(dq)
    if params is None or data is None or dq_params is None:
        return None
    return dequantize(quantize(data, params), dq_params, _float_dtype(view, dq))


def _scale_type(view: QdqView, node: ir.Node) -> ir.DataType | None:
    params = view.params(node)
    return params.scale_dtype if params is not None else None


def _float_dtype(view: QdqView, dq: ir.Node) -> np.dtype:
    params = view.params(dq)
    if params is not None and params.scale_dtype in (ir.DataType.FLOAT16, ir.DataType.DOUBLE):
        return np.dtype(params.scale_dtype.numpy())
    return np.dtype(np.float32)


def _dead_constants(removed: list[ir.Node], dead: set[ir.Node]) -> list[ir.Node]:
    """Constant nodes whose output only ``dead`` nodes read (adds them to ``dead``)."""
    found = []
    for node in removed:
        for value in node.inputs[1:]:
            producer = value.producer() if value is not None else None
            if (
                value is None or producer is None or producer in dead or producer.op_type != "Constant"
                or producer.domain not in ("", "ai.onnx") or value.is_graph_output()
                or any(use.node not in dead for use in value.uses())
            ):
                continue
            dead.add(producer)
            found.append(producer)
    return found


class StripQdqPairs(ir.passes.InPlacePass):
    """Remove all Q/DQ nodes; record activation scales in ``scales``.

    ``remove_dead_constants``: also remove the Constant nodes only the Q/DQ read (the dead-node
    removal that follows in ``translate`` would, one node at a time).
    """

    def __init__(
        self, scales: ScaleTable, constants: set[ir.Value] | None = None,
        view: QdqView | None = None, remove_dead_constants: bool = False,
        dequantize_float_layer_weights: bool = False,
        dequantized_weights: set[ir.Value] | None = None,
    ) -> None:
        super().__init__()
        self.view = view
        self.scales = scales
        # Values computed only from constants (a TF Reshape of a weight): quantizing one is
        # quantizing a weight, which TensorRT redoes itself, so it gets no activation scale.
        self.constants = constants or set()
        self.remove_dead_constants = remove_dead_constants
        self.dequantize_float_layer_weights = dequantize_float_layer_weights
        # Float weights stored as their Q/DQ pair computes them even for an INT8 layer: values
        # already on TensorRT's grid (``translation.weight_scales``), which requantize to themselves.
        self.dequantized_weights = dequantized_weights or set()
        self.removed = 0
        self.conflicts: list[str] = []
        # Activations the Q/DQ model reads both quantized and directly; implicit INT8 has one
        # scale per tensor, so after translation every reader sees the quantized values.
        self.mixed_readers: dict[ir.Value, list[str]] = {}
        self._kept_weights: set[ir.Node] = set()  # DQs of weights that stay float (rule 1)
        self._taken: set[str] | None = None  # names in use, once a Cast needs a new one

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        view = self.view if self.view is not None and self.view.graph is graph else QdqView(graph)
        for q in view.quantize_nodes:
            x = q.inputs[0]
            if x is None or x in self.mixed_readers or x in self.constants:
                continue
            direct = [
                node_label(u.node) for u in x.uses()
                if not is_quantize(u.node) and u.node.op_type not in _SHAPE_ONLY_READERS
            ]
            if direct and constant_source(x) is None:
                self.mixed_readers[x] = direct
        # Removed in one batch, not node by node: the DQs, whose outputs nobody reads once
        # rerouted, the Qs read only by those DQs and, with ``remove_dead_constants``, the
        # Constant nodes read only by these Qs and DQs (their scales and zero points).
        # Decided before any rerouting: whether a layer is INT8 is read from the DQs it reads.
        self._kept_weights = {
            dq for dq in view.dequantize_nodes if self._is_weight(view, dq)
            and self._keeps_float(dq.outputs[0], view)
        }
        rerouted: list[ir.Node] = []
        for dq in view.dequantize_nodes:
            self._strip_dequantize(graph, view, dq, rerouted)
        dead = set(rerouted)
        unread = [
            q for q in view.quantize_nodes
            if not q.outputs[0].is_graph_output()
            and all(use.node in dead for use in q.outputs[0].uses())
        ]
        dead.update(unread)
        removed = rerouted + unread
        if self.remove_dead_constants:
            removed += _dead_constants(removed, dead)
        remove_together(graph, removed)
        self.removed += len(rerouted) + len(unread)
        return ir.passes.PassResult(model, modified=self.removed > 0)

    def _strip_dequantize(
        self, graph: ir.Graph, view: QdqView, dq: ir.Node, rerouted: list[ir.Node]
    ) -> None:
        x = dq.inputs[0]
        assert x is not None
        q = view.quantize_of(dq)
        if q is not None:
            source = q.inputs[0]
            assert source is not None
            constant = constant_source(source) is not None or source in self.constants
            if constant and (dq not in self._kept_weights or source in self.dequantized_weights):
                baked = _quantized_constant(view, q, dq)
                if baked is not None:
                    value = ir.Value(name=None, const_value=ir.Tensor(baked))
                    self._reroute(graph, dq, value, rerouted, initializer=True)
                    return
            replacement = self._typed_like(graph, view, q, dq, source)
            if constant_source(source) is None and source not in self.constants:
                params = view.params(q)
                assert params is not None
                self._record(source, params.implicit_int8_scale, q)
                if replacement is not source:
                    self._record(replacement, params.implicit_int8_scale, q)
            self._reroute(graph, dq, replacement, rerouted)
            return
        if constant_source(x) is not None:
            array = dequantized_array(view, dq, _float_dtype(view, dq))
            weight = ir.Value(name=None, const_value=ir.Tensor(array))
            self._reroute(graph, dq, weight, rerouted, initializer=True)
            return
        if x.is_graph_input():
            params = view.params(dq)
            assert params is not None
            set_dtype(x, ir.DataType.from_numpy(_float_dtype(view, dq)))
            self._record(x, params.implicit_int8_scale, dq)
            self._reroute(graph, dq, x, rerouted)
            return
        raise AssertionError(f"unexpected DequantizeLinear {node_label(dq)}")

    def _typed_like(
        self, graph: ir.Graph, view: QdqView, q: ir.Node, dq: ir.Node, value: ir.Value
    ) -> ir.Value:
        """``value`` (what ``q`` reads), cast to the type ``dq`` writes when the two differ
        (rule 4). Unknown types are read from the scales: a Q reads, and a DQ writes, its scale's
        float type (float32 before opset 19)."""
        out = dq.outputs[0]
        want = out.dtype or _scale_type(view, dq)
        have = value.dtype or _scale_type(view, q)
        if want is None or have is None or want == have:
            return value
        if self._taken is None:
            self._taken = taken_names(graph)
        base = value.name or out.name or "tensor"
        typed = ir.Value(name=unique_name(self._taken, f"{base}_as_{want.name.lower()}"))
        cast = ir.Node("", "Cast", [value], [ir.AttrInt64("to", want)], outputs=[typed],
                       name=unique_name(self._taken, f"{base}_cast"))
        typed.dtype, typed.shape = want, out.shape
        graph.insert_after(dq, cast)
        return cast.outputs[0]

    def _keeps_float(self, value: ir.Value, view: QdqView) -> bool:
        if self.dequantize_float_layer_weights:
            return _weight_of_int8_layer(value, view, self.constants)
        return _weight_of_int8_layer(value, view, self.constants, any_layer=True)

    def _is_weight(self, view: QdqView, dq: ir.Node) -> bool:
        """Whether ``dq`` dequantizes a quantized constant (``constant -> Q -> DQ``)."""
        q = view.quantize_of(dq)
        source = q.inputs[0] if q is not None else None
        return source is not None and (constant_source(source) is not None
                                       or source in self.constants)

    def _record(self, value: ir.Value, scale: float, node: ir.Node) -> None:
        known = self.scales.entry(value)
        if known is None:
            self.scales.set(value, scale, ScaleOrigin.QDQ, node_label(node))
        elif known.scale != scale:
            # One tensor, one INT8 scale in implicit mode: keep the first, say so.
            self.conflicts.append(
                f"'{value.name}' is quantized by '{known.source}' (scale {known.scale:.9g}) and by "
                f"'{node_label(node)}' (scale {scale:.9g}); the cache keeps the first"
            )

    def _reroute(
        self, graph: ir.Graph, dq: ir.Node, replacement: ir.Value, rerouted: list[ir.Node],
        initializer: bool = False,
    ) -> None:
        """Make every reader of ``dq`` read ``replacement``; ``dq`` joins ``rerouted``, to be
        removed by the caller."""
        out = dq.outputs[0]
        name = out.name
        was_output = out.is_graph_output()
        # A graph output keeps its name and needs a producer of its own when the replacement is a
        # graph input, another graph output or a constant.
        needs_identity = was_output and (
            initializer or replacement.is_graph_input() or replacement.is_graph_output()
            or replacement.producer() is None
        )
        if needs_identity:
            identity = ir.Node("", "Identity", inputs=[replacement], name=f"{name}_identity")
            out.replace_all_uses_with(identity.outputs[0], replace_graph_outputs=True)
            graph.insert_after(dq, identity)
            identity.outputs[0].name = name
            identity.outputs[0].type = out.type
            identity.outputs[0].shape = out.shape
        else:
            out.replace_all_uses_with(replacement, replace_graph_outputs=True)
            if was_output:
                replacement.name = name
                if replacement.type is None:
                    replacement.type = out.type
                if replacement.shape is None:
                    replacement.shape = out.shape
        if initializer:
            replacement.name = f"{name}_float" if needs_identity else name
            graph.register_initializer(replacement)
        rerouted.append(dq)

