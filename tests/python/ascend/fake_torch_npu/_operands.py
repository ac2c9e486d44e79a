"""Reading MX operands the way the torch_npu matmuls do: element dtypes from the tensor dtype or the
``*_dtype`` argument, transposition from the strides, E8M0 scales in the paired layout
(ascend-npu-ops.md sections 3a, 4)."""

from __future__ import annotations

import torch

from . import _mx
from ._dtypes import FLOAT8_NAMES, FP4X2, dtype_name, tensor_dtype_name
from ._nz import is_transpose_of_contiguous


def element_kind(t: torch.Tensor, dtype_arg: object, arg: str, dtype_arg_name: str) -> str:
    """'float8_e4m3fn' / 'float8_e5m2' / FP4X2 / a plain float dtype name, from the tensor and its dtype argument.

    Packed FP4 travels as uint8 / int8 (or torch.float4_e2m1fn_x2) and must be declared with
    ``dtype_arg`` = 296; a byte tensor without it would be read as an 8-bit integer matrix."""
    declared = dtype_name(dtype_arg, dtype_arg_name)
    own = tensor_dtype_name(t)
    if own in FLOAT8_NAMES:
        if declared not in (None, own):
            raise ValueError(f"{dtype_arg_name}={dtype_arg!r} contradicts {arg}'s dtype {t.dtype}")
        return own
    if own in ("uint8", "int8", FP4X2):
        if declared != FP4X2:
            raise ValueError(
                f"{arg} is {t.dtype} but {dtype_arg_name} is {dtype_arg!r}: packed FP4 must be declared with "
                f"{dtype_arg_name}=296 (float4_e2m1fn_x2)"
            )
        return FP4X2
    if own in ("bfloat16", "float16", "float32"):
        return own
    raise ValueError(f"{arg}: unsupported dtype {t.dtype}")


def _fp4_bytes(t: torch.Tensor) -> torch.Tensor:
    return t if t.dtype == torch.uint8 else t.view(torch.uint8)


def lhs_values(x: torch.Tensor, kind: str) -> torch.Tensor:
    """[M, K] element values (float64) of an activation; FP4 is packed along K."""
    if kind == FP4X2:
        return _mx.decode_fp4(_mx.unpack_fp4(_fp4_bytes(x)))
    return x.to(torch.float64)


def rhs_values(w: torch.Tensor, kind: str) -> tuple[torch.Tensor, bool]:
    """Logical [..., K, N] element values (float64) of a weight, and whether it was a transposed view.

    FP4 packs along the stored last dim: a transposed view [K/2, N] of [N, K/2] holds N = its last dim,
    a plain [K, N/2] holds N = 2 x its last dim."""
    transposed = is_transpose_of_contiguous(w)
    if kind != FP4X2:
        return w.to(torch.float64), transposed
    if transposed:
        stored = _fp4_bytes(w.transpose(-1, -2))  # [..., N, K/2], contiguous
        return _mx.decode_fp4(_mx.unpack_fp4(stored)).transpose(-1, -2), True
    return _mx.decode_fp4(_mx.unpack_fp4(_fp4_bytes(w.contiguous()))), False


def scale_codes_bytes(s: torch.Tensor) -> torch.Tensor:
    return s.view(torch.uint8) if s.dtype == torch.float8_e8m0fnu else s


def lhs_block_codes(scale: torch.Tensor, m: int, k: int, arg: str) -> torch.Tensor:
    """Paired activation scales [M, ceil(K/64), 2] -> block codes [M, ceil(K/32)]."""
    pairs = -(-k // 64)
    if tuple(scale.shape) != (m, pairs, 2):
        raise ValueError(f"{arg}: must be [M, ceil(K/64), 2] = [{m}, {pairs}, 2] for K = {k}, got {tuple(scale.shape)}")
    return _mx.unpair_last(scale_codes_bytes(scale), -(-k // 32))


def rhs_block_codes(scale: torch.Tensor, lead: tuple[int, ...], k: int, n: int, arg: str) -> torch.Tensor:
    """Paired weight scales, logical [..., ceil(K/64), N, 2] -> block codes [..., ceil(K/32), N]."""
    pairs = -(-k // 64)
    expected = (*lead, pairs, n, 2)
    if tuple(scale.shape) != expected:
        raise ValueError(f"{arg}: must be logical [..., ceil(K/64), N, 2] = {list(expected)}, got {tuple(scale.shape)}")
    codes = scale_codes_bytes(scale).movedim(-2, -3)  # [..., N, pairs, 2]
    codes = codes.reshape(*lead, n, 2 * pairs)[..., : -(-k // 32)]
    return codes.transpose(-1, -2)


def mx_matmul(xv: torch.Tensor, x_codes: torch.Tensor, wv: torch.Tensor, w_codes: torch.Tensor) -> torch.Tensor:
    """sum over 32-blocks of dot(x_block, w_block) * 2^(sx - 127) * 2^(sw - 127), accumulated in float32.

    xv [M, K], x_codes [M, nb], wv [K, N], w_codes [nb, N] -> [M, N] float32."""
    x = _mx.dequantize_last(xv, x_codes)
    w = _mx.dequantize_last(wv.transpose(0, 1), w_codes.transpose(0, 1)).transpose(0, 1)
    return x.to(torch.float32) @ w.to(torch.float32)


def output_dtype_of(value: object, arg: str, allowed: tuple[str, ...], default: str | None = None) -> torch.dtype:
    name = dtype_name(value, arg) if value is not None else default
    if name not in allowed:
        raise ValueError(f"{arg}: must be one of {allowed}, got {value!r}")
    return getattr(torch, name)
