"""How torch_npu reads the dtype arguments of its ops (ascend-npu-ops.md section 0).

torch_npu's custom dtypes are plain integers, 256 + the ACL enum (293 = float8_e8m0fnu, 296 =
float4_e2m1fn_x2, ...). Integers below 256 are read as ``at::ScalarType``, which is how a ``torch.dtype``
passed to an ``int?`` argument arrives. Sources disagree on whether the torch spelling of e8m0 / fp4
is accepted (section 0, [M]); the emulator accepts both spellings everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

# 256 + ACL data type enum (torch_npu custom_dtype/Init.h, graph/c_types.h).
ACL_DTYPE_CODES: dict[int, str] = {
    285: "int4",
    290: "hifloat8",
    291: "float8_e5m2",
    292: "float8_e4m3fn",
    293: "float8_e8m0fnu",
    294: "float6_e3m2",
    295: "float6_e2m3",
    296: "float4_e2m1fn_x2",
    297: "float4_e1m2fn_x2",
}

# at::ScalarType values of the dtypes these ops meet (c10/core/ScalarType.h order).
SCALAR_TYPE_CODES: dict[int, str] = {
    0: "uint8",
    1: "int8",
    3: "int32",
    4: "int64",
    5: "float16",
    6: "float32",
    15: "bfloat16",
    23: "float8_e5m2",
    24: "float8_e4m3fn",
    44: "float8_e8m0fnu",
    45: "float4_e2m1fn_x2",
}

FLOAT8_NAMES = ("float8_e4m3fn", "float8_e5m2")
E8M0 = "float8_e8m0fnu"
FP4X2 = "float4_e2m1fn_x2"

_TORCH_BY_NAME: dict[str, torch.dtype] = {
    "uint8": torch.uint8,
    "int8": torch.int8,
    "int32": torch.int32,
    "int64": torch.int64,
    "float16": torch.float16,
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float8_e5m2": torch.float8_e5m2,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e8m0fnu": torch.float8_e8m0fnu,
    "float4_e2m1fn_x2": torch.float4_e2m1fn_x2,
}


def dtype_name(value: object, arg: str) -> str | None:
    """Canonical name of a dtype argument given as a torch.dtype, an ACL code (>= 256) or a ScalarType int.

    None stays None. Anything else raises ValueError naming ``arg``.
    """
    if value is None:
        return None
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{arg}: expected a torch.dtype or an integer dtype code, got {value!r}")
    table = ACL_DTYPE_CODES if value >= 256 else SCALAR_TYPE_CODES
    if value not in table:
        raise ValueError(f"{arg}: unknown dtype code {value} (codes >= 256 are 256 + ACL enum, below are ScalarType)")
    return table[value]


def require_dtype(value: object, arg: str, allowed: Iterable[str]) -> str:
    """dtype_name(value) checked against ``allowed``; None is an error."""
    allowed = tuple(allowed)
    name = dtype_name(value, arg)
    if name not in allowed:
        raise ValueError(f"{arg}: must be one of {allowed} (torch.dtype or integer code), got {value!r}")
    return name


def torch_dtype(name: str) -> torch.dtype:
    return _TORCH_BY_NAME[name]


def tensor_dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def check_e8m0_tensor(
    t: torch.Tensor, dtype_arg: object, arg: str, dtype_arg_name: str, *, byte_auto_wraps: bool = False
) -> None:
    """An E8M0 scale tensor: float8_e8m0fnu, or uint8 with ``dtype_arg`` = e8m0 (293 / torch dtype).

    A uint8 tensor without the dtype argument would be wrapped as ACL_UINT8 on the device, except where
    the op auto-wraps bytes (``byte_auto_wraps``: npu_grouped_matmul's antiquant_scale).
    """
    if t.dtype == torch.float8_e8m0fnu:
        if dtype_arg is not None:
            require_dtype(dtype_arg, dtype_arg_name, (E8M0,))
        return
    if t.dtype != torch.uint8:
        raise ValueError(f"{arg}: E8M0 scales must be float8_e8m0fnu or uint8, got {t.dtype}")
    if dtype_arg is None:
        if byte_auto_wraps:
            return
        raise ValueError(
            f"{arg} is uint8 but {dtype_arg_name} was not given: uint8 scales are wrapped as ACL_UINT8; "
            f"pass {dtype_arg_name}=293 (float8_e8m0fnu)"
        )
    require_dtype(dtype_arg, dtype_arg_name, (E8M0,))
