"""The GGUF op names servers already call, with sgl-kernel's Python argument names, computed by lowbit.

sgl-kernel (``sgl_kernel.ggml_*``) and vLLM (``vllm._custom_ops.ggml_*``) expose the same GGUF ops;
these functions take the same arguments and return the same shapes and dtypes, so a server's GGUF
layer switches by importing them from here (README, "Switching a server's GGUF layer"). They call
``torch.ops.lowbit.ggml_*`` (csrc/torch/compat_ops.cpp), which run lowbit's own ops and dispatcher on
the tensors' device, CPU included. ``weight`` is the GGUF tensor's bytes, uint8 [rows, row_bytes];
``quant_type`` the raw ggml type id (``gguf.GGMLQuantizationType`` values work).

Supported types: q5_0, q8_0, mxfp4 and every I-quant (iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs,
iq3_s, iq4_nl, iq4_xs). Others (k-quants, q4_0, ...) raise RuntimeError with sgl-kernel's wording
("Unsupported GGUF ... type"); a server keeps its own path for them. The MoE names (ggml_moe_a8,
ggml_moe_a8_vec, ggml_moe_get_block_size) are in ``lowbit.compat_moe``.
"""

from __future__ import annotations

import torch

from . import _api  # noqa: F401  (loads lowbit._C, which registers torch.ops.lowbit.ggml_*)
from ._types import GGUF_WEIGHT_TYPES, QuantType

#: ggml type ids the compat ops accept.
SUPPORTED_GGML_TYPES: frozenset[int] = frozenset(int(t) for t in GGUF_WEIGHT_TYPES)


def ggml_dequantize(
    weight: torch.Tensor, quant_type: int, M: int, N: int, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """The first M * N weights of `weight`, in order, as [M, N] in `dtype` (default float16).

    Linear layers pass (rows, K); the embedding lookup passes (hidden, tokens) for the gathered
    rows and views the result as [tokens, hidden] (the values are in row order either way).
    """
    if M <= 0 or N <= 0:
        raise ValueError(f"M, N: the GGUF weight's shape [{M}, {N}] must have positive dimensions")
    return torch.ops.lowbit.ggml_dequantize(weight, int(quant_type), M, N, dtype)


def ggml_mul_mat_vec_a8(weight: torch.Tensor, x: torch.Tensor, quant_type: int, row: int) -> torch.Tensor:
    """Decode-time y = x @ W^T: x [batch, K] float16/bfloat16/float32 -> [batch, row] in x's dtype."""
    return torch.ops.lowbit.ggml_mul_mat_vec_a8(weight, x, int(quant_type), row)


def ggml_mul_mat_a8(weight: torch.Tensor, x: torch.Tensor, quant_type: int, row: int) -> torch.Tensor:
    """Prefill y = x @ W^T: x [batch, K] -> [batch, row] in x's dtype (any batch, any whole-block K)."""
    return torch.ops.lowbit.ggml_mul_mat_a8(weight, x, int(quant_type), row)


@torch.compiler.assume_constant_result
def ggml_supports_iq_mmq() -> bool:
    """Whether ggml_mul_mat_a8 takes the I-quants (always, in lowbit); a constant under torch.compile."""
    return bool(torch.ops.lowbit.ggml_supports_iq_mmq())


def supports_ggml_type(quant_type: int) -> bool:
    """Whether the compat ops compute on this ggml type id (so a server can keep its fallback for others)."""
    return int(quant_type) in SUPPORTED_GGML_TYPES


__all__ = [
    "SUPPORTED_GGML_TYPES",
    "QuantType",
    "ggml_dequantize",
    "ggml_mul_mat_a8",
    "ggml_mul_mat_vec_a8",
    "ggml_supports_iq_mmq",
    "supports_ggml_type",
]
