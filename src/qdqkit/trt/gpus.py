"""Public spec-sheet figures of the GPUs (and DLA cores) the latency cost model knows.

Peaks are dense (no 2:4 sparsity), in tera-operations per second, one multiply-accumulate counted
as two operations, as the vendors print them:

- ``fp32``: CUDA-core FP32; ``tf32``: tensor-core TF32 (Ampere and later, None before); ``fp16``:
  tensor-core FP16 (the FP16-accumulate figure for GeForce cards, whose FP32-accumulate rate is
  half: TensorRT's FP16 tactics accumulate in FP16 where accuracy allows); ``int8``: tensor-core
  INT8; ``bandwidth_gbs``: memory bandwidth in GB/s.

Sources: NVIDIA data sheets (A100 80GB PCIe, H100 SXM5/PCIe, L4, T4, Jetson AGX Orin 64GB) and
the GeForce Ampere/Ada and TITAN RTX (Turing) architecture whitepapers' tables.
"""

from __future__ import annotations

from dataclasses import dataclass

from qdqkit.core.errors import QdqkitError


@dataclass(frozen=True)
class Gpu:
    name: str
    description: str
    fp32_tops: float
    tf32_tops: float | None  # None: no TF32 tensor cores (Turing, DLA)
    fp16_tops: float
    int8_tops: float
    bandwidth_gbs: float
    has_fp32: bool = True  # DLA cores run FP16 and INT8 only

    def peak_tops(self, math: str) -> float:
        """Peak throughput of a math mode: "int8", "fp16", "tf32" or "fp32"."""
        if math == "int8":
            return self.int8_tops
        if math == "fp16":
            return self.fp16_tops
        if math == "tf32" and self.tf32_tops is not None:
            return self.tf32_tops
        return self.fp32_tops


GPUS: tuple[Gpu, ...] = (
    Gpu("A100", "NVIDIA A100 80GB PCIe (Ampere, sm80)", 19.5, 156.0, 312.0, 624.0, 1935.0),
    Gpu("A100-SXM", "NVIDIA A100 80GB SXM (Ampere, sm80)", 19.5, 156.0, 312.0, 624.0, 2039.0),
    Gpu("H100", "NVIDIA H100 SXM5 (Hopper, sm90)", 67.0, 494.7, 989.4, 1978.9, 3350.0),
    Gpu("H100-PCIE", "NVIDIA H100 PCIe (Hopper, sm90)", 51.0, 378.0, 756.0, 1513.0, 2000.0),
    Gpu("L4", "NVIDIA L4 (Ada, sm89)", 30.3, 60.0, 121.0, 242.0, 300.0),
    Gpu("T4", "NVIDIA T4 (Turing, sm75)", 8.1, None, 65.0, 130.0, 320.0),
    Gpu("RTX3090", "GeForce RTX 3090 (Ampere, sm86)", 35.6, 35.6, 142.0, 284.0, 936.0),
    Gpu("RTX4090", "GeForce RTX 4090 (Ada, sm89)", 82.6, 82.6, 330.3, 660.6, 1008.0),
    Gpu("TITAN-RTX", "NVIDIA TITAN RTX (Turing, sm75)", 16.3, None, 130.5, 261.0, 672.0),
    Gpu("ORIN", "Jetson AGX Orin 64GB GPU (Ampere, sm87)", 5.3, 42.5, 85.0, 170.0, 204.8),
    Gpu("ORIN-DLA", "Jetson AGX Orin 64GB, one DLA core", 0.0, None, 13.1, 26.3, 204.8,
        has_fp32=False),
)

DEFAULT_GPU = "A100"
DEFAULT_DLA = "ORIN-DLA"


def default_device(target: str) -> str:
    """What latency is predicted on when nobody names a device: a DLA core for ``--target dla``
    (timing a DLA build on an A100 answers no question a DLA user asks), else an A100."""
    return DEFAULT_DLA if target == "dla" else DEFAULT_GPU


def _key(name: str) -> str:
    return "".join(ch for ch in name.upper() if ch.isalnum())


def find_gpu(name: str) -> Gpu:
    """The GPU called ``name`` (case, spaces and dashes ignored: "rtx 4090" is RTX4090)."""
    wanted = _key(name)
    for gpu in GPUS:
        if _key(gpu.name) == wanted:
            return gpu
    known = ", ".join(gpu.name for gpu in GPUS)
    raise QdqkitError(f"unknown GPU '{name}': use one of {known}")


def gpu_names() -> list[str]:
    return [gpu.name for gpu in GPUS]
