"""References for the Ascend backend tests, built on lowbit's own CPU codecs (never the emulator's)."""

from __future__ import annotations

import lowbit
import torch
from lowbit import QuantType

# Bounds, stated once. Relative rounding error of one element (half an ulp at the top of a binade):
# E4M3 (3 mantissa bits) 2^-4, E2M1 (1 mantissa bit) 2^-2; bf16 output 2^-8.
E4M3_REL = 2.0**-4
E2M1_REL = 2.0**-2
BF16_REL = 2.0**-8
FP32_ACC_REL = 2.0**-12  # fp32 accumulation over K <= 4096 terms: K * 2^-24, relative to sum |x| |w|


def unpair(paired: torch.Tensor, k: int) -> torch.Tensor:
    """Paired E8M0 [..., ceil(K/64), 2] -> [..., K/32] through lowbit's C++ layout op."""
    p = paired.view(torch.uint8) if paired.dtype == torch.float8_e8m0fnu else paired
    return torch.ops.lowbit.mx_unpair_scales(p.contiguous(), k)


def dequant(elements: torch.Tensor, scales: torch.Tensor, qtype: QuantType) -> torch.Tensor:
    """float64 values of a split MX tensor (elements [..., K] E4M3 or [..., K/2] packed E2M1, scales
    [..., K/32]) decoded by lowbit.dequantize."""
    e = elements.contiguous().view(torch.uint8)
    return lowbit.dequantize(e, qtype, scales=scales.contiguous().view(torch.uint8)).to(torch.float64)


def dequant_paired(elements: torch.Tensor, paired: torch.Tensor, qtype: QuantType) -> torch.Tensor:
    """As dequant, with the scales in Ascend's paired layout."""
    k = elements.shape[-1] * (2 if qtype == QuantType.MXFP4_SPLIT else 1)
    return dequant(elements, unpair(paired, k), qtype)


def rel_err(y: torch.Tensor, ref: torch.Tensor) -> float:
    """||y - ref|| / ||ref|| in float64."""
    y64, r64 = y.to(torch.float64), ref.to(torch.float64)
    return float((y64 - r64).norm() / r64.norm())


def assert_tight(y: torch.Tensor, x_deq: torch.Tensor, w_deq: torch.Tensor, bias: torch.Tensor | None = None) -> None:
    """y (bf16 [M, N]) against the float64 product of the operands the device saw (x_deq [M, K],
    w_deq [N, K], both dequantized by lowbit): per element, within bf16 output rounding plus fp32
    accumulation: |y - ref| <= 2^-8 |ref| + 2^-12 (|x| |w|^T)."""
    ref = x_deq @ w_deq.t()
    if bias is not None:
        ref = ref + bias.to(torch.float64)
    bound = BF16_REL * ref.abs() + FP32_ACC_REL * (x_deq.abs() @ w_deq.abs().t()) + 1e-30
    err = (y.to(torch.float64) - ref).abs()
    worst = float((err / bound).max())
    assert worst <= 1.0, f"output differs from the dequantized-operand product by {worst:.3g}x the bound"


def moe_reference(
    x: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    *,
    limit: float | None = None,
    expert_range: tuple[int, int] = (0, -1),
) -> torch.Tensor:
    """float64 MoE on float weights w13 [E, 2I, H], w2 [E, H, I] holding global experts
    [start, start + E): out[t] = sum_j w[t, j] W2_e (silu(g) * u), g / u the halves of W13_e x[t], clamped
    as the swiglu limit says; ids outside the held experts contribute zero."""
    start = expert_range[0]
    experts = w13.shape[0]
    x64 = x.to(torch.float64)
    out = torch.zeros(x.shape[0], w2.shape[1], dtype=torch.float64)
    half = w13.shape[1] // 2
    for t in range(x.shape[0]):
        for j in range(topk_ids.shape[1]):
            e = int(topk_ids[t, j]) - start
            if not 0 <= e < experts:
                continue
            gu = w13[e].to(torch.float64) @ x64[t]
            g, u = gu[:half], gu[half:]
            if limit is not None:
                g, u = g.clamp(max=limit), u.clamp(-limit, limit)
            h = torch.nn.functional.silu(g) * u
            out[t] += float(topk_weights[t, j]) * (w2[e].to(torch.float64) @ h)
    return out


def random_topk(tokens: int, experts: int, top_k: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Distinct expert ids per token (int32 [T, k]) and positive weights (float32 [T, k])."""
    ids = torch.stack([torch.randperm(experts, generator=gen)[:top_k] for _ in range(tokens)]).to(torch.int32)
    weights = torch.rand(tokens, top_k, generator=gen) + 0.1
    return ids, weights


# Bounds on ||y - ref|| / ||ref|| against a reference without the quantization the backend adds, for
# random Gaussian data: the first-order sum of the per-element relative rounding bounds of every operand
# the device quantizes (measured errors sit at a third to a half of these).
ACT_FP8_BOUND = E4M3_REL  # only the activations are quantized (offline weights are the reference's own)
ACT_FP4_BOUND = E2M1_REL
BOUNDS_ONLINE = {  # activations and the weight quantized on the device
    "w8a8_mxfp8": 2 * E4M3_REL,
    "w4a8_mxfp4": E4M3_REL + E2M1_REL,
    "w4a4_mxfp4": 2 * E2M1_REL,
    "w4a4_mxfp4_dual": 2 * E2M1_REL,
}
