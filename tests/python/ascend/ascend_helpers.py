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


def device_values(q: torch.Tensor, paired: torch.Tensor) -> torch.Tensor:
    """float64 [M, K] of a quantized activation (FP8, or packed FP4 uint8) with its paired E8M0 scales,
    decoded by the emulator's own decoder: independent of lowbit, so a decoder bug on either side shows."""
    from fake_torch_npu import _mx, _operands

    kind = "float4_e2m1fn_x2" if q.dtype == torch.uint8 else "float8_e4m3fn"
    values = _operands.lhs_values(q, kind)
    codes = _operands.lhs_block_codes(paired.view(torch.uint8), values.shape[0], values.shape[1], "scale")
    return _mx.dequantize_last(values, codes)


def _swiglu64(gu: torch.Tensor, limit: float | None, alpha: float, beta: float) -> torch.Tensor:
    half = gu.shape[-1] // 2
    g, u = gu[:, :half], gu[:, half:]
    if limit is not None:
        g, u = g.clamp(max=limit), u.clamp(-limit, limit)
    return g * torch.sigmoid(alpha * g) * (u + beta)


def _assert_within(got: torch.Tensor, ref: torch.Tensor, bound: torch.Tensor, what: str) -> None:
    err = (got.to(torch.float64) - ref).abs()
    worst = float((err / (bound + 1e-30)).max()) if err.numel() else 0.0
    assert worst <= 1.0 and torch.isfinite(got.to(torch.float64)).all(), f"{what}: {worst:.3g}x the bound"


def check_moe_tight(
    npu: object,
    x: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    w13: tuple[torch.Tensor, torch.Tensor, QuantType],
    w2: tuple[torch.Tensor, torch.Tensor, QuantType],
    out: torch.Tensor,
    *,
    expert_range: tuple[int, int] | None = None,
    limit: float | None = None,
    alpha: float = 1.0,
    beta: float = 0.0,
) -> None:
    """Per element, every stage of an MX MoE call the emulator logged, against float64 products of the
    operands the device saw: activations as the emulator quantized them (its own decoder), weights from
    the checkpoint (elements, [E, N, K/32] scales, type) decoded by lowbit.
      1. gate/up: C = x_q W13_e^T per group; fused: h (requantized) within one requant step of
         swiglu(C) per 32-block; unfused: the bf16 GEMM output tight, then its SwiGLU is what was quantized;
      2. down: y = h_q W2_e^T per group, tight (bf16 output rounding + fp32 accumulation);
      3. combine: out[t] = sum_j w[t, j] y[row(t, j)] within bf16 rounding of the terms."""
    state = npu.state  # type: ignore[attr-defined]
    route = state.last("npu_moe_init_routing_v2")
    routed_x, row_idx, counts, routed_scale = route.outputs
    start = 0 if expert_range is None else expert_range[0]
    ends = counts.cumsum(0).tolist()
    bounds = list(zip([0] + ends[:-1], ends, strict=True))
    w13_deq = dequant(*w13)  # [E, 2I, H]
    w2_deq = dequant(*w2)  # [E, H, I]
    grouped = state.all("npu_grouped_matmul")
    if routed_x.dtype == torch.float8_e4m3fn:
        x_deq = device_values(routed_x, routed_scale.view(torch.uint8).reshape(routed_x.shape[0], -1, 2))
    else:  # quantized after the routing
        quant = [
            c
            for c in state.all("npu_dynamic_mx_quant")
            if c.info["input"].storage_ptr == routed_x.untyped_storage().data_ptr()
        ][-1]
        x_deq = device_values(*quant.outputs)
    rows = int(ends[-1]) if ends else 0
    c = torch.zeros(rows, w13_deq.shape[1], dtype=torch.float64)
    c_abs = torch.zeros_like(c)
    for e, (a, b) in enumerate(bounds):
        c[a:b] = x_deq[a:b] @ w13_deq[e].t()
        c_abs[a:b] = x_deq[a:b].abs() @ w13_deq[e].abs().t()
    if "npu_grouped_matmul_swiglu_quant_v2" in state.ops():
        h, h_scale = state.last("npu_grouped_matmul_swiglu_quant_v2").outputs
        h_deq = device_values(h[:rows], h_scale[:rows])
        s = _swiglu64(c, limit, alpha, beta)
        block_max = s.abs().reshape(rows, -1, 32).amax(-1).repeat_interleave(32, -1)
        step = 0.5 if h.dtype == torch.uint8 else 0.25  # saturation of the OCP floor rule, relative to the block max
        _assert_within(
            h_deq, s, step * block_max + FP32_ACC_REL * c_abs.abs().amax(-1, keepdim=True), "gate/up (fused)"
        )
    else:
        gate_up = grouped[0].outputs[0][:rows]
        _assert_within(gate_up, c, BF16_REL * c.abs() + FP32_ACC_REL * c_abs, "gate/up GEMM")
        quant_h = state.last("npu_dynamic_mx_quant")
        s = _swiglu64(gate_up.to(torch.float64), limit, alpha, beta)
        _assert_within(quant_h["input"][:rows], s, BF16_REL * s.abs() + 1e-30, "SwiGLU fed to the requant")
        h_deq = device_values(*(t[:rows] for t in quant_h.outputs))
    down = grouped[-1]
    y = down.outputs[0]
    h_ref = torch.zeros(rows, w2_deq.shape[1], dtype=torch.float64)
    h_abs = torch.zeros_like(h_ref)
    for e, (a, b) in enumerate(bounds):
        h_ref[a:b] = h_deq[a:b] @ w2_deq[e].t()
        h_abs[a:b] = h_deq[a:b].abs() @ w2_deq[e].abs().t()
    _assert_within(y[:rows], h_ref, BF16_REL * h_ref.abs() + FP32_ACC_REL * h_abs, "down GEMM")
    tokens, top_k = topk_ids.shape
    idx = row_idx.to(torch.int64).view(tokens, top_k)
    experts = w13_deq.shape[0]
    local = (topk_ids.to(torch.int64) - start >= 0) & (topk_ids.to(torch.int64) - start < experts)
    y64 = y.to(torch.float64)
    ref = torch.zeros(tokens, y.shape[1], dtype=torch.float64)
    ref_abs = torch.zeros_like(ref)
    for t in range(tokens):
        for j in range(top_k):
            if local[t, j]:
                term = float(topk_weights[t, j]) * y64[int(idx[t, j])]
                ref[t] += term
                ref_abs[t] += term.abs()
    _assert_within(out, ref, 2 * BF16_REL * ref_abs + 1e-30, "combine")
