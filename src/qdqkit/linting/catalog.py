"""The lint rule catalog: stable codes, what each finding costs, and what to do about it.

Codes never change meaning once published. ``rule_id`` points into the rule base
(``docs/tensorrt-qdq-rules.md``); ``fixable`` says whether ``qdqkit fix`` is meant to apply it.
Codes by theme: 1xx weighted ops and their epilogues, 2xx residual and elementwise, 3xx Concat and
pooling, 4xx the Q/DQ nodes themselves, 5xx model-level and target-level facts.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Severity(str, enum.Enum):
    ERROR = "error"  # breaks a fusion or the build: the engine is slower (or fails) for certain
    WARNING = "warning"  # likely costs Reformats or precision; verify on an engine
    INFO = "info"  # a fact worth knowing; nothing to fix by default

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    severity: Severity
    summary: str
    why: str  # which fusion breaks, which Reformat appears
    fix: str  # what to do
    fixable: bool  # whether ``qdqkit fix`` is meant to apply it
    rule_id: str  # the rule base entry it comes from
    check: str  # how the check decides, in a few lines


def _r(code: str, name: str, severity: Severity, summary: str, why: str, fix: str, fixable: bool,
       rule_id: str, check: str) -> Rule:
    return Rule(code, name, severity, summary, why, fix, fixable, rule_id, check)


E, W, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO

RULES: tuple[Rule, ...] = (
    _r("QDQ101", "weighted-op-half-quantized", E,
       "a weighted op has a quantized weight but a float activation, or the reverse",
       "TensorRT runs a weighted op INT8 only with DQ on both the activation and the weight; "
       "otherwise it runs FP16/FP32 and any DQ in front of it becomes a standalone Reformat.",
       "Quantize the missing side: Q/DQ on the activation input, per-channel Q/DQ on the weight.",
       True, "D1, C1",
       "For each Conv/ConvTranspose/Gemm/MatMul with a constant weight: exactly one of (activation "
       "through DQ, weight through DQ) holds."),
    _r("QDQ102", "weighted-op-not-quantized", W,
       "a weighted op in a quantized model has neither its activation nor its weight quantized",
       "It runs in FP16 (FP32 when strongly typed) between INT8 neighbours: Reformats on both sides.",
       "Quantize it, or keep it float on purpose (GEMV-shaped or tiny layers, C15/C20).",
       True, "D1, C15",
       "The model has Q/DQ nodes and a weighted op with a constant weight has no DQ on either input."),
    _r("QDQ103", "q-on-weighted-output", E,
       "a Q sits on a weighted op's output before its BatchNorm, activation or residual Add",
       "The Q splits the conv from its epilogue: BN/activation/Add run as a separate layer and the "
       "conv writes INT8 that is immediately dequantized.",
       "Remove the Q/DQ between the weighted op and its epilogue; quantize after the activation "
       "(the next layer's input) instead.",
       True, "D2, C2",
       "A weighted op's output (possibly after BN/bias) goes to a Q whose DQ feeds BatchNormalization, "
       "an activation or a bias/scale op."),
    _r("QDQ104", "qdq-inside-epilogue", E,
       "Q/DQ between BatchNorm and the activation of a conv",
       "TensorRT fuses Conv+BN+activation only when nothing sits between them; a Q/DQ in the chain "
       "ends the fused kernel early and adds a pointwise layer.",
       "Drop the Q/DQ inside the chain; keep one Q after the activation.",
       True, "D3, C2",
       "A BatchNormalization output (of a conv chain) goes through Q/DQ into an activation."),
    _r("QDQ105", "qdq-inside-silu", E,
       "Q/DQ inside Conv -> Sigmoid -> Mul (SiLU/Swish)",
       "Conv+Sigmoid+Mul fuses into the conv epilogue only without Q/DQ inside; with them, the conv "
       "writes INT8, Sigmoid and Mul run as a separate pointwise layer with Reformats.",
       "Remove the Q/DQ between the conv and Sigmoid/Mul; quantize the Mul's output consumers.",
       True, "C7",
       "A conv-chain output reaches Sigmoid and Mul(x, sigmoid(x)) where either path passes a Q/DQ."),
    _r("QDQ106", "convtranspose-activation", W,
       "a ConvTranspose is followed by an activation",
       "Explicit-mode ConvTranspose+activation fusion has been reported to fail (no fusion or wrong "
       "output) and INT8 deconvolution can be slower than FP16.",
       "Verify the engine (qdqkit lint --engine); if the deconv is not fused, try Q/DQ between the "
       "deconv and the activation, or keep the deconv FP16.",
       False, "C13",
       "A ConvTranspose's epilogue chain (after BN) contains an activation."),
    _r("QDQ107", "qdq-between-pad-and-conv", E,
       "Q/DQ between a Pad and the Conv it pads",
       "Pad folds into the convolution only when it directly feeds it; Q/DQ in between keeps a "
       "separate padding layer and a Reformat.",
       "Move the Q/DQ in front of the Pad (Pad commutes with quantization).",
       True, "C12",
       "A Pad's output is quantized by a Q whose DQ feeds a Conv."),
    _r("QDQ108", "int8-channel-alignment", W,
       "an INT8 convolution's channel count is not a multiple of 32",
       "INT8 tensor-core kernels use 32-wide channel vectors (CHW32): other counts are padded "
       "(wasted MACs) or served by slower CHW4 kernels, with Reformats between the two layouts.",
       "Pad the channel count to a multiple of 32 (e.g. 72 -> 96) or accept the cost.",
       False, "F1, F3, E4",
       "For each INT8 conv, input or output channels % 32 != 0 (input channels <= 4, the image stem, "
       "are exempt: CHW4 is native there); grouped convs also need channels per group % 4 == 0 (F2)."),
    _r("QDQ201", "residual-skip-float", E,
       "a residual Add fused into a conv has a float skip (identity) input",
       "The fused Conv+Add(+ReLU) takes its output precision from the skip input: the block writes "
       "FP16 and the next Q cannot fuse (a Quantize Reformat).",
       "Quantize the skip input (Q/DQ on the identity branch, same scale as its other readers).",
       True, "C3, D4",
       "A predicted conv layer fused a residual Add whose residual input is float."),
    _r("QDQ202", "residual-conv-branch-quantized", E,
       "a residual Add's conv-branch input carries Q/DQ",
       "With Q/DQ on both Add inputs, TensorRT cannot fuse the Add into the conv: the conv writes "
       "INT8, the Add runs as a separate pointwise layer.",
       "Remove the Q/DQ on the conv branch; keep it only on the residual (identity) input.",
       True, "C3, C5",
       "An Add with two computed inputs where an input is DQ(Q(x)) and x is the single-reader output "
       "of a conv chain."),
    _r("QDQ203", "add-scale-mismatch", W,
       "an Add whose two quantized inputs have different scales",
       "When the Add runs as an INT8 pointwise layer (both inputs quantized), different input scales "
       "force a rescale; NVIDIA's YOLO QAT samples bind both inputs to one quantizer.",
       "Give both inputs one scale (share the quantizer), or quantize only the residual input.",
       True, "C6, B4",
       "An Add whose both computed inputs come through DQ with different per-tensor scales."),
    _r("QDQ204", "residual-int8-output-float", W,
       "a residual block has an INT8 skip input but nothing after it is quantized",
       "TensorRT dequantizes the skip input in a standalone Reformat and the block writes float.",
       "Quantize the block's consumer too (e.g. the pool input), or drop the skip Q/DQ there.",
       True, "C4",
       "A predicted conv layer fused a residual Add whose INT8 residual input was dequantized."),
    _r("QDQ205", "int8-in-float-out", W,
       "a non-weighted op has INT8 inputs but a float output",
       "Non-weighted layers run INT8 only when their output is quantized too; otherwise every "
       "input DQ becomes a Reformat and the op runs FP16.",
       "Quantize the op's output (a Q/DQ after it), or remove the Q/DQ on its inputs.",
       True, "D5, C8",
       "A predicted pointwise/pooling/other layer runs float although one of its inputs is a DQ."),
    _r("QDQ301", "concat-scale-mismatch", W,
       "Concat inputs and output have different scales",
       "Concat is elided only when every input already has the output's scale; each other input "
       "gets its own requantize Reformat.",
       "Give all Concat inputs and the Concat output one shared scale.",
       True, "C11, B4, E3",
       "A Concat whose inputs come through DQ (or whose output goes to Q) with more than one scale."),
    _r("QDQ302", "concat-mixed-precision", E,
       "a Concat mixes INT8 and float inputs",
       "A Concat with one float input is computed in float: every INT8 input is dequantized "
       "(a Reformat each) and the INT8 region breaks.",
       "Quantize every Concat input (one shared scale) or none.",
       True, "C11",
       "A Concat with at least one input through DQ and at least one computed float input."),
    _r("QDQ303", "maxpool-scale-mismatch", W,
       "the Q after a MaxPool and the Qs of its input's other readers have different scales",
       "MaxPool commutes with Q/DQ; the quantized tensor is shared only if all the Qs agree, "
       "otherwise a requantize or a second Quantize Reformat appears.",
       "Use one scale for the Q after the MaxPool and the Qs on the MaxPool's input.",
       True, "C10, B4",
       "A MaxPool's input tensor and its output are each quantized (directly) with different scales."),
    _r("QDQ304", "float-pool-between-int8", W,
       "an AveragePool/GlobalAveragePool runs float between INT8 layers",
       "Averaging pools do not commute with Q/DQ: without DQ before and Q after, the pool runs "
       "FP16 with a Reformat on each side.",
       "Put Q/DQ on the pool's input (and keep the Q after it).",
       True, "C9",
       "A predicted averaging-pool layer runs float while its producer or its reader is INT8."),
    _r("QDQ401", "per-channel-activation", E,
       "an activation is quantized per channel",
       "TensorRT supports per-channel scales only on constant weights: the build fails.",
       "Quantize activations per tensor.",
       False, "A3, D7",
       "An activation (non-constant) Q or DQ has more than one scale."),
    _r("QDQ402", "nonzero-zero-point", E,
       "a Q/DQ has a non-zero zero point",
       "TensorRT's ONNX parser accepts only symmetric quantization (zero points all zero); "
       "UINT8 is read as INT8.",
       "Re-quantize symmetrically with INT8 and zero zero points.",
       False, "A1",
       "A Q or DQ whose zero point is present and not all zeros."),
    _r("QDQ403", "per-tensor-weight", INFO,
       "a weight is quantized per tensor",
       "Per-tensor weight scales cost accuracy; TensorRT recommends per-channel weights.",
       "Quantize weights per output channel.",
       False, "D7, A5",
       "A weighted op's weight DQ has a single scale."),
    _r("QDQ404", "several-q-on-one-tensor", W,
       "several Q nodes quantize one tensor",
       "Qs with the same scale merge; with different scales each one is a separate Quantize "
       "(Reformat) and the producer cannot write INT8 for all readers.",
       "Quantize a tensor once and let every reader share the Q/DQ.",
       True, "B7",
       "A tensor read by more than one activation Q; error-free (info) when the scales are equal."),
    _r("QDQ405", "requantize-chain", W,
       "a DQ is immediately followed by a Q",
       "DQ->Q with equal scales cancels; with different scales an INT8->INT8 requantize layer "
       "remains.",
       "Remove the pair, or make the scales equal.",
       True, "B6, E3",
       "A DequantizeLinear whose output feeds a QuantizeLinear."),
    _r("QDQ406", "q-on-network-input", INFO,
       "a network input is quantized",
       "There is nothing earlier to fuse the Q into: it runs as a standalone Reformat unless the "
       "input is declared INT8 (trtexec --inputIOFormats=int8:chw32).",
       "Nothing, or feed INT8 input with --inputIOFormats.",
       False, "B8, E7",
       "A Q whose input is a graph input."),
    _r("QDQ407", "standalone-qdq", W,
       "a Q or DQ runs as its own Reformat layer",
       "A Q whose producer writes float, or a DQ whose reader needs float, becomes a standalone "
       "Reformat (extra memory traffic).",
       "See the layer's note: quantize the producer's other readers, or the reader's output.",
       True, "D6, E1, E2",
       "A predicted Q/DQ Reformat layer that no other finding already names."),
    _r("QDQ408", "runtime-scale", E,
       "a Q/DQ scale or zero point is computed at run time",
       "TensorRT <= 10.12 needs build-time constant scales; qdqkit cannot read the scale either.",
       "Fold the scale computation into an initializer.",
       False, "A2",
       "A Q or DQ whose scale or zero point is not a constant."),
    _r("QDQ501", "float-model", INFO,
       "the model has no Q/DQ nodes",
       "Nothing is quantized: TensorRT builds an FP16 (or FP32) engine.",
       "Quantize it (qdqkit quantize, ModelOpt, ...) to get INT8.",
       False, "A9",
       "The graph has no QuantizeLinear/DequantizeLinear."),
    _r("QDQ502", "plugin-op", INFO,
       "a custom-domain op becomes an opaque plugin layer",
       "Plugins run in float unless they absorb Q/DQ themselves; Q/DQ around them stay separate.",
       "Nothing by default; for INT8 plugins, let the plugin consume the scales.",
       False, "C19",
       "A node whose domain is neither the default ONNX domain nor com.microsoft."),
    _r("QDQ503", "fp32-remainder", W,
       "strongly typed build: unquantized layers run FP32",
       "TensorRT 11 builds strongly typed: layers without Q/DQ run in the model's float type, so an "
       "FP32 model keeps FP32 layers that --best would have run FP16.",
       "Convert the float part to FP16 (e.g. ModelOpt AutoCast) before building.",
       False, "A9",
       "With --trt 11, predicted non-Reformat layers whose precision is FP32."),
    _r("QDQ504", "qdq-on-dla", W,
       "DLA takes its INT8 scales from a calibration cache, not from Q/DQ",
       "Through TensorRT 10, DLA's INT8 path is implicit: a Q/DQ model must be translated to a "
       "Q/DQ-free model plus a calibration cache, else DLA layers run FP16.",
       "Run qdqkit translate and build with --calib and --useDLACore.",
       False, "I1, I2",
       "--target dla on a model that has Q/DQ nodes."),
    _r("QDQ505", "dla-gpu-fallback", W,
       "a layer cannot run on DLA and falls back to the GPU",
       "Each GPU<->DLA switch costs a Reformat and a separate submission.",
       "Replace the op with a DLA-supported one or keep the DLA region contiguous.",
       False, "I5, I7, E6",
       "--target dla: a predicted layer failing DLA's layer support rules."),
    _r("QDQ506", "integer-operator", E,
       "QLinear*/Integer operators (QLinearConv, ConvInteger, ...)",
       "TensorRT imports only Q/DQ-format quantization: these ops fail to parse.",
       "Export in QDQ format (onnxruntime QuantFormat.QDQ).",
       False, "A7",
       "A node with op type QLinearConv, QLinearMatMul, ConvInteger or MatMulInteger."),
)

RULES_BY_CODE = {rule.code: rule for rule in RULES}


def rule(code: str) -> Rule:
    from qdqkit.core.errors import QdqkitError

    found = RULES_BY_CODE.get(code.strip().upper())
    if found is None:
        raise QdqkitError(f"no lint rule '{code}': run 'qdqkit rules' to list them")
    return found
