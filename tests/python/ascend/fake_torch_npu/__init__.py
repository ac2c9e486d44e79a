"""A CPU emulation of the torch_npu ops lowbit's Ascend backend calls, written from
/work/shared/docs/ascend-npu-ops.md and independent of lowbit's own codecs.

Tests install this package as ``sys.modules["torch_npu"]``. Every op takes and returns CPU tensors,
checks the argument contracts the facts doc states (dtypes in both spellings, layouts, group-list types,
transposes, FRACTAL_NZ), computes the documented math, and records the call in ``STATE.calls``.
Uncertain behaviours are selectable on ``STATE`` (``init_routing_scale_rule``, ``swiglu_requant_scale_rule``).
"""

from __future__ import annotations

from . import npu
from ._matmul_ops import npu_dual_level_quant_matmul, npu_quant_matmul
from ._moe_ops import (
    npu_grouped_matmul,
    npu_grouped_matmul_swiglu_quant_v2,
    npu_moe_finalize_routing,
    npu_moe_init_routing_v2,
    npu_moe_token_unpermute,
)
from ._quant_ops import get_npu_format, npu_dynamic_dual_level_mx_quant, npu_dynamic_mx_quant, npu_format_cast
from ._state import STATE, Call, EmulatorState, TensorInfo

__version__ = "2.13.0.emulated"

# torch_npu's custom dtypes are integers (256 + ACL enum).
int4 = 285
hifloat8 = 290
float8_e8m0fnu = 293
float4_e2m1fn_x2 = 296
float4_e1m2fn_x2 = 297

__all__ = [
    "STATE",
    "Call",
    "EmulatorState",
    "TensorInfo",
    "get_npu_format",
    "npu",
    "npu_dual_level_quant_matmul",
    "npu_dynamic_dual_level_mx_quant",
    "npu_dynamic_mx_quant",
    "npu_format_cast",
    "npu_grouped_matmul",
    "npu_grouped_matmul_swiglu_quant_v2",
    "npu_moe_finalize_routing",
    "npu_moe_init_routing_v2",
    "npu_moe_token_unpermute",
    "npu_quant_matmul",
]
