"""Dtypes that torch and torch_npu spell differently (ascend-npu-ops.md section 0).

torch_npu's custom dtypes are integers, 256 + the ACL enum: 293 is float8_e8m0fnu and 296 is packed
float4_e2m1fn_x2. torch has its own ``torch.float8_e8m0fnu`` / ``torch.float4_e2m1fn_x2``. The backend
accepts either spelling from its callers, and spells each op argument the way every source agrees works:
296 for FP4 (a torch_npu release rejected ``torch.float4_e2m1fn_x2``) and, by default, 293 for E8M0
(the grouped matmuls' graph-mode checks require 293). ``set_e8m0_spelling("torch")`` switches E8M0
arguments to ``torch.float8_e8m0fnu`` should a torch_npu release want that instead.
"""

from __future__ import annotations

import torch

E8M0_CODE = 293
FP4X2_CODE = 296
FLOAT8_E4M3_CODE = 292
FLOAT8_E5M2_CODE = 291
FORMAT_ND = 2
FORMAT_FRACTAL_NZ = 29

DtypeLike = torch.dtype | int | str

# Canonical names, and every spelling a caller may use for them.
_BY_CODE = {
    E8M0_CODE: "float8_e8m0fnu",
    FP4X2_CODE: "float4_e2m1fn_x2",
    FLOAT8_E4M3_CODE: "float8_e4m3fn",
    FLOAT8_E5M2_CODE: "float8_e5m2",
}
_BY_TORCH = {
    torch.float8_e8m0fnu: "float8_e8m0fnu",
    torch.float4_e2m1fn_x2: "float4_e2m1fn_x2",
    torch.float8_e4m3fn: "float8_e4m3fn",
    torch.float8_e5m2: "float8_e5m2",
    torch.bfloat16: "bfloat16",
    torch.float16: "float16",
    torch.float32: "float32",
    torch.uint8: "uint8",
}
_NAMES = set(_BY_CODE.values()) | set(_BY_TORCH.values())

_e8m0_spelling: str = "code"


def canonical_dtype(value: DtypeLike, arg: str = "dtype") -> str:
    """The canonical name ("float8_e8m0fnu", "float4_e2m1fn_x2", "float8_e4m3fn", ...) of a dtype given
    as a torch.dtype, a torch_npu integer code (293, 296, 292, 291) or a name."""
    if isinstance(value, torch.dtype):
        if value in _BY_TORCH:
            return _BY_TORCH[value]
    elif isinstance(value, bool):
        pass
    elif isinstance(value, int):
        if value in _BY_CODE:
            return _BY_CODE[value]
    elif isinstance(value, str):
        name = value.removeprefix("torch.").removeprefix("torch_npu.").lower()
        if name in _NAMES:
            return name
    raise ValueError(
        f"{arg}: unknown dtype {value!r}; use a torch.dtype, a torch_npu code (293 float8_e8m0fnu, "
        f"296 float4_e2m1fn_x2, 292 float8_e4m3fn, 291 float8_e5m2) or a name"
    )


def set_e8m0_spelling(spelling: str) -> None:
    """How E8M0 scale dtypes are passed to torch_npu ops: "code" (293, the default) or "torch"
    (torch.float8_e8m0fnu)."""
    global _e8m0_spelling
    if spelling not in ("code", "torch"):
        raise ValueError(f"spelling: must be 'code' or 'torch', got {spelling!r}")
    _e8m0_spelling = spelling


def e8m0_arg() -> int | torch.dtype:
    """The value passed as scale_dtype / per_token_scale_dtype / weight_scale_dtype / x_scale_dtype."""
    return E8M0_CODE if _e8m0_spelling == "code" else torch.float8_e8m0fnu


def fused_e8m0_arg() -> int:
    """E8M0 scale dtypes of npu_grouped_matmul_swiglu_quant_v2: always the code 293, whatever the spelling
    setting. The op compares weight_scale_dtype / x_scale_dtype with the integer DType::FLOAT8_E8M0
    (Ascend/op-plugin op_plugin/ops/opapi/GroupedMatmulSwigluQuantV2NpuOpapi.cpp @517f2e7d), so
    torch.float8_e8m0fnu, which arrives as ScalarType 44, is rejected."""
    return E8M0_CODE


def fp4_arg() -> int:
    """The value passed as x1_dtype / x2_dtype / x_dtype / weight_dtype / quant_dtype / dst_type for FP4."""
    return FP4X2_CODE


def e8m0_bytes(t: torch.Tensor, arg: str) -> torch.Tensor:
    """E8M0 codes as uint8: accepts uint8 or torch.float8_e8m0fnu (viewed, no copy)."""
    if t.dtype == torch.uint8:
        return t
    if t.dtype == torch.float8_e8m0fnu:
        return t.view(torch.uint8)
    raise ValueError(f"{arg}: E8M0 scales must be uint8 or float8_e8m0fnu, got {t.dtype}")


def fp4_bytes(t: torch.Tensor, arg: str) -> torch.Tensor:
    """Packed E2M1 pairs as uint8: accepts uint8, int8 or torch.float4_e2m1fn_x2 (viewed, no copy)."""
    if t.dtype == torch.uint8:
        return t
    if t.dtype in (torch.int8, torch.float4_e2m1fn_x2):
        return t.view(torch.uint8)
    raise ValueError(f"{arg}: packed FP4 must be uint8, int8 or float4_e2m1fn_x2, got {t.dtype}")


def fp8_e4m3(t: torch.Tensor, arg: str) -> torch.Tensor:
    """E4M3 elements as torch.float8_e4m3fn: accepts that dtype or uint8 bytes (viewed, no copy)."""
    if t.dtype == torch.float8_e4m3fn:
        return t
    if t.dtype == torch.uint8:
        return t.view(torch.float8_e4m3fn)
    raise ValueError(f"{arg}: MXFP8 elements must be float8_e4m3fn or uint8 bytes, got {t.dtype}")
