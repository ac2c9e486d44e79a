"""lowbit's Ascend NPU backend: MXFP8 / MXFP4 linear and MoE layers through torch_npu (Ascend 950).

Not run on Ascend hardware: verified only against a CPU emulation of the torch_npu ops it calls
(tests/python/ascend, written from ascend-npu-ops.md). torch_npu is imported lazily, on first use.

- ``linear`` / ``fused_moe``: lowbit's API for NPU tensors (lowbit.linear / lowbit.fused_moe forward here).
- ``prepare_linear`` and the dense classes, ``NpuMoE``: prepared layers, online (float weights quantized
  at load) or offline (pre-quantized checkpoints); schemes W8A8 MXFP8, W4A4 MXFP4 (single- and
  dual-level), W4A8 MXFP4; MoE tensor-parallel and expert-parallel paths, optional swiglu limit.
- ``probe``: what this machine supports (lowbit.capabilities()["npu"]).
"""

from __future__ import annotations

from . import _device, layout
from ._dtypes import E8M0_CODE, FP4X2_CODE, canonical_dtype, set_e8m0_spelling
from .api import COVERED_TYPES, clear_cache, fused_moe, linear
from .dense import (
    SCHEMES,
    Bf16Linear,
    NpuLinear,
    W4A4Mxfp4DualLevelLinear,
    W4A4Mxfp4Linear,
    W4A8Mxfp4Linear,
    W8A8Mxfp8Linear,
    prepare_linear,
)
from .moe import Bf16Experts, MxExperts, NpuMoE, swiglu
from .probe import probe


def is_npu_tensor(t: object) -> bool:
    """True for a torch tensor on an Ascend NPU."""
    return _device.is_npu_tensor(t)


__all__ = [
    "COVERED_TYPES",
    "E8M0_CODE",
    "FP4X2_CODE",
    "SCHEMES",
    "Bf16Experts",
    "Bf16Linear",
    "MxExperts",
    "NpuLinear",
    "NpuMoE",
    "W4A4Mxfp4DualLevelLinear",
    "W4A4Mxfp4Linear",
    "W4A8Mxfp4Linear",
    "W8A8Mxfp8Linear",
    "canonical_dtype",
    "clear_cache",
    "fused_moe",
    "is_npu_tensor",
    "layout",
    "linear",
    "prepare_linear",
    "probe",
    "set_e8m0_spelling",
    "swiglu",
]
