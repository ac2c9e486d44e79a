"""npu_quant_matmul (MX modes) and npu_dual_level_quant_matmul (ascend-npu-ops.md section 4)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from . import _mx
from ._dtypes import FP4X2, check_e8m0_tensor
from ._nz import FORMAT_NZ, NZ_FORMATS
from ._operands import (
    element_kind,
    lhs_block_codes,
    lhs_values,
    mx_matmul,
    output_dtype_of,
    rhs_block_codes,
    rhs_values,
    scale_codes_bytes,
)
from ._state import STATE

# Sources of the checks below (repository, path, commit):
_QMM_NZ_DOC = "hicann/ops-nn matmul/quant_batch_matmul_v3/docs/aclnnQuantMatmulWeightNz.md @e5c3fa93"
_QMM_OPAPI = "Ascend/op-plugin op_plugin/ops/opapi/QuantMatmulKernelNpuOpApi.cpp @517f2e7d"


def _check_bias(bias: torch.Tensor | None, n: int) -> torch.Tensor | None:
    """MX full quantization: null / FLOAT32 bias of shape (n,) (_QMM_NZ_DOC, MX table)."""
    if bias is None:
        return None
    if bias.dtype != torch.float32 or tuple(bias.shape) != (n,):
        raise ValueError(
            f"bias: MX full quantization takes a float32 [N] = [{n}] bias, got {bias.dtype} {tuple(bias.shape)} "
            f"({_QMM_NZ_DOC})"
        )
    return bias


def _check_a8w4_bias(bias: torch.Tensor | None, n: int, out_dtype: torch.dtype) -> torch.Tensor | None:
    """MX A8W4 (FP8 x FP4): bias null / BFLOAT16 / FLOAT16, the output dtype, shape (1, n) (_QMM_NZ_DOC)."""
    if bias is None:
        return None
    if bias.dtype != out_dtype or tuple(bias.shape) != (1, n):
        raise ValueError(
            f"bias: W4A8 (FP8 x FP4) takes the bias in the output dtype {out_dtype}, shape [1, N] = [1, {n}], "
            f"got {bias.dtype} {tuple(bias.shape)} ({_QMM_NZ_DOC})"
        )
    return bias.reshape(n)


def _transposed_dims(t: torch.Tensor, dim: int) -> bool:
    """is_transpose_certain_two_dims (_QMM_OPAPI): stride(dim + 1) == stride(dim) * size(dim)."""
    return t.stride(dim + 1) == t.stride(dim) * t.size(dim)


def _same_transpose(x: torch.Tensor, scale: torch.Tensor, dim_x: int, dim_scale: int) -> bool:
    """is_x_scale_same_transpose (_QMM_OPAPI): a matrix and its scale agree on transposition, unless one of
    them has both checked dims of size 1."""
    if x.dim() < dim_x + 2 or scale.dim() < dim_scale + 2:
        return True
    if x.size(dim_x) == 1 and x.size(dim_x + 1) == 1:
        return True
    if scale.size(dim_scale) == 1 and scale.size(dim_scale + 1) == 1:
        return True
    return _transposed_dims(x, dim_x) == _transposed_dims(scale, dim_scale)


def npu_quant_matmul(
    x1: torch.Tensor,
    x2: torch.Tensor,
    scale: torch.Tensor,
    *,
    offset: torch.Tensor | None = None,
    pertoken_scale: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    output_dtype: object = None,
    x1_dtype: object = None,
    x2_dtype: object = None,
    pertoken_scale_dtype: object = None,
    scale_dtype: object = None,
    group_sizes: Sequence[int] | None = None,
    y_scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """MX quantized matmul y[M, N] = x1[M, K] @ x2[K, N] with per-32 E8M0 scales on both sides.

    x1: float8 [M, K] or packed FP4 uint8 [M, K/2] (x1_dtype=296). x2: logical [K, N]: float8, or packed
    FP4 (x2_dtype=296) as a transpose view [K/2, N] of [N, K/2] or plain [K, N/2]; may be FRACTAL_NZ
    (then it must be the transposed view). scale: logical [ceil(K/64), N, 2]; pertoken_scale
    [M, ceil(K/64), 2]; group_sizes [1, 1, 32] (full MX) or [0, 0, 32] (W4A8). Only MX modes are emulated.
    """
    STATE.record(
        "npu_quant_matmul",
        dict(
            x1=x1,
            x2=x2,
            scale=scale,
            offset=offset,
            pertoken_scale=pertoken_scale,
            bias=bias,
            output_dtype=output_dtype,
            x1_dtype=x1_dtype,
            x2_dtype=x2_dtype,
            pertoken_scale_dtype=pertoken_scale_dtype,
            scale_dtype=scale_dtype,
            group_sizes=group_sizes,
            y_scale=y_scale,
        ),
    )
    if group_sizes is None or len(group_sizes) != 3 or group_sizes[2] != 32:
        raise NotImplementedError(f"group_sizes: only MX modes ([gm, gn, 32]) are emulated, got {group_sizes}")
    if offset is not None or y_scale is not None:
        raise NotImplementedError("offset / y_scale are not part of the MX modes")
    if pertoken_scale is None:
        raise ValueError("pertoken_scale: MX mode needs the activation's E8M0 scales [M, ceil(K/64), 2]")
    if x1.dim() != 2 or x2.dim() != 2:
        raise ValueError(f"x1 and x2 must be 2-D in MX mode, got {tuple(x1.shape)} and {tuple(x2.shape)}")
    x1_kind = element_kind(x1, x1_dtype, "x1", "x1_dtype")
    x2_kind = element_kind(x2, x2_dtype, "x2", "x2_dtype")
    if x1_kind not in ("float8_e4m3fn", "float8_e5m2", FP4X2) or x2_kind not in ("float8_e4m3fn", "float8_e5m2", FP4X2):
        raise ValueError(f"x1 / x2: MX mode needs FP8 or packed FP4 operands, got {x1_kind} and {x2_kind}")
    if x1_kind == FP4X2 and x2_kind != FP4X2:
        raise ValueError("x1 is FP4 but x2 is not: only FP8 x FP8, FP4 x FP4 and FP8 x FP4 (W4A8) exist")
    w4a8 = x1_kind != FP4X2 and x2_kind == FP4X2
    expected_groups = ([0, 0, 32], [1, 1, 32]) if w4a8 else ([1, 1, 32],)
    if list(group_sizes) not in [list(g) for g in expected_groups]:
        raise ValueError(
            f"group_sizes: must be one of {expected_groups} for this operand pair, got {list(group_sizes)}"
        )
    check_e8m0_tensor(scale, scale_dtype, "scale", "scale_dtype")
    check_e8m0_tensor(pertoken_scale, pertoken_scale_dtype, "pertoken_scale", "pertoken_scale_dtype")
    out_dtype = output_dtype_of(output_dtype, "output_dtype", ("bfloat16", "float16"))
    # MX scales are 3-D, so the checked dims are the first two of each scale (_QMM_OPAPI, need_check_trans).
    if pertoken_scale.dim() >= 2 and scale.dim() >= 2:
        if not _same_transpose(x1, pertoken_scale, x1.dim() - 2, max(pertoken_scale.dim() - 3, 0)):
            raise ValueError(f"x1 / pertoken_scale: their transposes are not the same ({_QMM_OPAPI})")
        if not _same_transpose(x2, scale, x2.dim() - 2, max(scale.dim() - 3, 0)):
            raise ValueError(
                f"x2 / scale: their transposes are not the same (a transposed weight needs the transposed "
                f"[G, N, 2] view of its [N, G, 2] scale) ({_QMM_OPAPI})"
            )

    nz = STATE.format_of(x2) in NZ_FORMATS  # is_nz_format (_QMM_OPAPI): FRACTAL_NZ, NZ_C0_4, NZ_C0_16
    xv = lhs_values(x1, x1_kind)
    wv, transposed = rhs_values(x2, x2_kind)
    if nz and not transposed:
        raise ValueError(
            "x2 is FRACTAL_NZ but not a transposed view: cast the contiguous [N, K] weight, then transpose"
        )
    if w4a8 and not transposed:
        raise ValueError("x2: W4A8 (FP8 x FP4) needs x2 transposed (a transpose view of the stored [N, K/2])")
    m, k = xv.shape
    k2, n = wv.shape
    if k != k2:
        raise ValueError(f"x1 / x2: inner dims differ (K = {k} from x1, {k2} from x2)")
    if FP4X2 in (x1_kind, x2_kind) and k <= 2:
        raise ValueError(f"FP4 operands need K > 2, got {k}")
    if w4a8 and (k % 8 or n % 8):
        raise ValueError(f"W4A8 (FP8 x FP4) needs K % 8 == 0 and N % 8 == 0, got K = {k}, N = {n} ({_QMM_NZ_DOC})")
    x_codes = lhs_block_codes(pertoken_scale, m, k, "pertoken_scale")
    w_codes = rhs_block_codes(scale, (), k, n, "scale")
    y = mx_matmul(xv, x_codes, wv, w_codes)
    bias = _check_a8w4_bias(bias, n, out_dtype) if w4a8 else _check_bias(bias, n)
    if bias is not None:
        y = y + bias.to(torch.float32)
    out = y.to(out_dtype)
    STATE.calls[-1].outputs = out
    return out


def npu_dual_level_quant_matmul(
    x1: torch.Tensor,
    x2: torch.Tensor,
    x1_level0_scale: torch.Tensor,
    x2_level0_scale: torch.Tensor,
    x1_level1_scale: torch.Tensor,
    x2_level1_scale: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    output_dtype: object = torch.bfloat16,
) -> torch.Tensor:
    """Dual-level MXFP4 matmul: y = sum over 512-groups g of l0x[m, g] * l0w[g, n] *
    sum over 32-blocks of dot(x, w) * 2^(l1x) * 2^(l1w), + bias.

    x1 uint8 [M, K/2] ND; x2 uint8 [N, K/2] in FRACTAL_NZ (treated as transposed, not a view);
    x1_level0 float32 [M, ceil(K/512)]; x2_level0 float32 [ceil(K/512), N]; x1_level1 [M, ceil(K/64), 2];
    x2_level1 [N, ceil(K/64), 2] (E8M0 as uint8 or float8_e8m0fnu); bias float32 [N]; all contiguous."""
    STATE.record(
        "npu_dual_level_quant_matmul",
        dict(
            x1=x1,
            x2=x2,
            x1_level0_scale=x1_level0_scale,
            x2_level0_scale=x2_level0_scale,
            x1_level1_scale=x1_level1_scale,
            x2_level1_scale=x2_level1_scale,
            bias=bias,
            output_dtype=output_dtype,
        ),
    )
    named = dict(
        x1=x1,
        x2=x2,
        x1_level0_scale=x1_level0_scale,
        x2_level0_scale=x2_level0_scale,
        x1_level1_scale=x1_level1_scale,
        x2_level1_scale=x2_level1_scale,
    )
    for name, t in named.items():
        if not t.is_contiguous():
            raise ValueError(f"{name}: must be contiguous (no views), got strides {t.stride()}")
    for name in ("x1", "x2"):
        if named[name].dtype not in (torch.uint8, torch.int8, torch.float4_e2m1fn_x2) or named[name].dim() != 2:
            raise ValueError(
                f"{name}: must be 2-D packed FP4 (uint8/int8), got {named[name].dtype} {tuple(named[name].shape)}"
            )
    if STATE.format_of(x2) != FORMAT_NZ:
        raise ValueError("x2: must be FRACTAL_NZ (npu_format_cast(weight, 29) of the contiguous [N, K/2] weight)")
    if STATE.format_of(x1) == FORMAT_NZ:
        raise ValueError("x1: must be ND")
    for name in ("x1_level0_scale", "x2_level0_scale"):
        if named[name].dtype != torch.float32:
            raise ValueError(f"{name}: must be float32, got {named[name].dtype}")
    for name in ("x1_level1_scale", "x2_level1_scale"):
        if named[name].dtype not in (torch.uint8, torch.float8_e8m0fnu):
            raise ValueError(f"{name}: must be E8M0 (uint8 or float8_e8m0fnu), got {named[name].dtype}")
    out_dtype = output_dtype_of(output_dtype, "output_dtype", ("bfloat16", "float16"))
    xv = lhs_values(x1, FP4X2)  # [M, K]
    wv = lhs_values(x2, FP4X2)  # [N, K]
    m, k = xv.shape
    n = wv.shape[0]
    if wv.shape[1] != k:
        raise ValueError(f"x1 / x2: K differs ({k} vs {wv.shape[1]})")
    groups = -(-k // 512)
    if tuple(x1_level0_scale.shape) != (m, groups) or tuple(x2_level0_scale.shape) != (groups, n):
        raise ValueError(
            f"level0 scales must be [M, ceil(K/512)] = [{m}, {groups}] and [ceil(K/512), N] = [{groups}, {n}], got "
            f"{tuple(x1_level0_scale.shape)} and {tuple(x2_level0_scale.shape)}"
        )
    x_codes = lhs_block_codes(x1_level1_scale, m, k, "x1_level1_scale")
    w_codes = lhs_block_codes(x2_level1_scale, n, k, "x2_level1_scale")
    x = _mx.dequantize_last(xv, x_codes) * x1_level0_scale.to(torch.float64).repeat_interleave(512, -1)[:, :k]
    w = _mx.dequantize_last(wv, w_codes) * x2_level0_scale.to(torch.float64).t().repeat_interleave(512, -1)[:, :k]
    y = x.to(torch.float32) @ w.to(torch.float32).t()
    bias = _check_bias(bias, n)
    if bias is not None:
        if not bias.is_contiguous():
            raise ValueError("bias: must be contiguous")
        y = y + bias
    out = y.to(out_dtype)
    STATE.calls[-1].outputs = out
    return out


__all__ = ["npu_quant_matmul", "npu_dual_level_quant_matmul", "scale_codes_bytes"]
