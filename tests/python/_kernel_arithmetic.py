"""Emulations of what lowbit's CUDA kernels round, so that a test compares a kernel with the exact
result of its own arithmetic and only float32 summation order (and the output rounding) may differ.

bf16 tensor-core MMVQ (csrc/cuda/mmvq_kernel.cuh, render_bf16.cuh):
  - a weight group decodes to exact integer magnitudes m <= 128 with signs and one float32 scale s
    (include/lowbit/formats: MagnitudeGroup); the kernel rounds s to bf16 first, then forms
    m * bf16(s) in one fused multiply-add and rounds that once to bf16:
        weight = sign * bf16(m * bf16(s))
    (not bf16 of the float32 decode s * m: that rounds s * m to float32 first, and keeps all of s);
  - MXFP8 (Fp8Group): bf16(e4m3 * 2^e), exact (four significant bits times a power of two);
  - activations: bf16 as they are; float32 and float16 (via float32) rounded to nearest even;
  - products of two bf16 values are exact in float32; sums in float32 on the tensor cores.
The scales come from the block bytes with the formulas, and in the float32 operation order, of
the format headers; `kernel_bf16_weights` checks that they reproduce the float32 decode bit for bit.
"""

from __future__ import annotations

import os

import lowbit
import numpy as np
import torch
from lowbit import QuantType
from lowbit.testing import BLOCK

_ELEMS_PER_SCALE = {
    QuantType.Q8_0: 32,
    QuantType.Q5_0: 32,
    QuantType.IQ4_NL: 32,
    QuantType.IQ4_XS: 32,
    QuantType.IQ2_XXS: 32,
    QuantType.IQ2_XS: 16,
    QuantType.IQ2_S: 16,
    QuantType.IQ3_XXS: 32,
    QuantType.IQ3_S: 32,
    QuantType.IQ1_S: 32,
    QuantType.IQ1_M: 16,
    QuantType.MXFP4: 32,
    QuantType.MXFP4_SPLIT: 32,
}

F32 = np.float32


def _fp16_at(blocks: np.ndarray, offset: int) -> np.ndarray:
    return blocks[..., offset : offset + 2].copy().view(np.float16)[..., 0].astype(F32)


def _u32_at(blocks: np.ndarray, offset: int) -> np.ndarray:
    return blocks[..., offset : offset + 4].copy().view(np.uint32)[..., 0]


def _iq2_scale(d: np.ndarray, s4: np.ndarray) -> np.ndarray:
    return (d * (F32(0.5) + s4.astype(F32))) * F32(0.25)


def _nibble_scales(blocks: np.ndarray, offset: int, count: int) -> np.ndarray:
    """`count` 4-bit scales, two per byte from `offset` (low nibble first): [..., count] int."""
    b = blocks[..., offset : offset + (count + 1) // 2].astype(np.int64)
    return np.stack([b & 0xF, b >> 4], axis=-1).reshape(*b.shape[:-1], -1)[..., :count]


def group_scales(qtype: QuantType, w: torch.Tensor, scales: torch.Tensor | None) -> np.ndarray:
    """The float32 scale of every scale group of a 2-D weight: [N, K / elems_per_scale]."""
    if qtype == QuantType.MXFP4_SPLIT:
        e = scales.numpy().astype(np.int64)
        return (np.ldexp(F32(1), e - 127).astype(F32) * F32(0.5)).astype(F32)
    elems, nbytes = BLOCK[qtype]
    n = w.shape[0]
    blocks = w.numpy().reshape(n, -1, nbytes)
    if qtype in (QuantType.Q8_0, QuantType.Q5_0, QuantType.IQ4_NL):
        s = _fp16_at(blocks, 0)[..., None]
    elif qtype == QuantType.MXFP4:
        e = blocks[..., 0].astype(np.int64)
        s = np.ldexp(F32(1), e - 128).astype(F32)[..., None]  # ggml's half E8M0 (subnormal at 0, 1)
    elif qtype == QuantType.IQ4_XS:
        d = _fp16_at(blocks, 0)[..., None]
        high = blocks[..., 2:4].copy().view(np.uint16)[..., 0].astype(np.int64)
        low = _nibble_scales(blocks, 4, 8)
        ls = low | (((high[..., None] >> (2 * np.arange(8))) & 3) << 4)
        s = d * (ls - 32).astype(F32)
    elif qtype == QuantType.IQ2_XXS:
        d = _fp16_at(blocks, 0)[..., None]
        aux = np.stack([_u32_at(blocks, 2 + 8 * ib + 4) for ib in range(8)], axis=-1)
        s = _iq2_scale(d, aux >> 28)
    elif qtype in (QuantType.IQ2_XS, QuantType.IQ2_S):
        d = _fp16_at(blocks, 0)[..., None]
        s = _iq2_scale(d, _nibble_scales(blocks, 66 if qtype == QuantType.IQ2_XS else 74, 16))
    elif qtype == QuantType.IQ3_XXS:
        d = _fp16_at(blocks, 0)[..., None]
        aux = np.stack([_u32_at(blocks, 2 + 64 + 4 * ib) for ib in range(8)], axis=-1)
        s = (d * (F32(0.5) + (aux >> 28).astype(F32))) * F32(0.5)
    elif qtype == QuantType.IQ3_S:
        d = _fp16_at(blocks, 0)[..., None]
        s = d * (1 + 2 * _nibble_scales(blocks, 106, 8)).astype(F32)
    elif qtype == QuantType.IQ1_S:
        d = _fp16_at(blocks, 0)[..., None]
        qh = blocks[..., 34:50].copy().view(np.uint16).astype(np.int64)
        s = (d * (2 * ((qh >> 12) & 7) + 1).astype(F32)) * F32(0.125)
    elif qtype == QuantType.IQ1_M:
        words = blocks[..., 48:56].copy().view(np.uint16).astype(np.int64)
        bits = (
            (words[..., 0] >> 12)
            | ((words[..., 1] >> 8) & 0xF0)
            | ((words[..., 2] >> 4) & 0xF00)
            | (words[..., 3] & 0xF000)
        )
        d = bits.astype(np.uint16).view(np.float16).astype(F32)[..., None]
        s_index = np.arange(16)
        s3 = (words[..., s_index >> 2] >> (6 * ((s_index >> 1) & 1) + 3 * (s_index & 1))) & 7
        s = (d * (2 * s3 + 1).astype(F32)) * F32(0.125)
    else:
        raise ValueError(f"qtype: no magnitude-and-scale form for {qtype.type_name}")
    return np.ascontiguousarray(s.astype(F32).reshape(n, -1))


def kernel_bf16_weights(qtype: QuantType, w: torch.Tensor, scales: torch.Tensor | None = None) -> torch.Tensor:
    """The bf16 weights the bf16 tensor-core MMVQ multiplies, as float64 [N, K] (2-D weights)."""
    decoded = lowbit.dequantize(w, qtype, scales=scales).numpy()
    if qtype == QuantType.MXFP8_E4M3:
        as_bf16 = torch.from_numpy(decoded).to(torch.bfloat16).double()
        assert torch.equal(as_bf16, torch.from_numpy(decoded).double()), "E4M3 times 2^e must be exact in bf16"
        return as_bf16
    s = np.repeat(group_scales(qtype, w, scales), _ELEMS_PER_SCALE[qtype], axis=1)
    assert s.shape == decoded.shape
    mag_s = np.abs(s)
    m = np.where(mag_s > 0, np.rint(np.abs(decoded).astype(np.float64) / np.where(mag_s > 0, mag_s, 1)), 0.0)
    # the scales are right only if integer magnitudes <= 128 give back the float32 decode exactly
    assert m.max() <= 128, f"{qtype.type_name}: magnitude {m.max()} > 128"
    again = (mag_s * m.astype(F32)).astype(F32)
    bad = np.flatnonzero(again != np.abs(decoded))
    assert bad.size == 0, f"{qtype.type_name}: scales do not reproduce the decode at {bad[:5]}"
    s_bf16 = torch.from_numpy(mag_s).to(torch.bfloat16).float()
    weight = (torch.from_numpy(m.astype(F32)) * s_bf16).to(torch.bfloat16).double()  # exact product, one rounding
    return weight * torch.from_numpy(np.sign(decoded).astype(np.float64))


def bf16_activations(x: torch.Tensor) -> torch.Tensor:
    """Activations as the bf16 kernels read them (float16 through float32, which is exact), float64."""
    return x.float().to(torch.bfloat16).double()


def q8_activations(x: torch.Tensor) -> torch.Tensor:
    """The int8 MMVQ's activation quantization, emulated in float32 as the kernel computes it:
    per token and 32 weights d = amax * (1/127), q = rint(x * (127 / amax)); returns q * d (float64)."""
    xb = x.detach().cpu().float().numpy().reshape(x.shape[0], -1, 32)
    amax = np.abs(xb).max(axis=-1, keepdims=True)
    d = amax * (np.float32(1) / np.float32(127))
    inv = np.where(amax > 0, np.float32(127) / np.where(amax > 0, amax, np.float32(1)), np.float32(0))
    q = np.rint(xb.astype(np.float64) * inv.astype(np.float64))
    assert d.dtype == np.float32 and inv.dtype == np.float32 and np.abs(q).max() <= 127
    return torch.from_numpy((q * d.astype(np.float64)).reshape(x.shape))


def moe_vec_activations(x: torch.Tensor, qtype: QuantType) -> torch.Tensor:
    """The activations lowbit's CUDA MoE vector path multiplies, float64 on x's device: x rounded to
    bf16, then (every weight type with an int8 form: moe_vec_int8 in include/lowbit/moe_policy.h)
    quantized as the int8 MMVQ does (q8_activations); MXFP8's float32 kernel takes the bf16 values."""
    xb = x.float().to(torch.bfloat16)
    if qtype == QuantType.MXFP8_E4M3:
        return xb.double()
    return q8_activations(xb).to(x.device)


def half_ulp_ratio(dtype: torch.dtype) -> float:
    """The largest relative error of rounding to `dtype` (to nearest): 2^-8 for bf16, 2^-11 fp16."""
    return {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}[dtype]


def assert_rounded_result(y: torch.Tensor, ref: torch.Tensor, accumulate_tol: float, what: str) -> None:
    """y (float32, bf16 or fp16) is ref computed in float32 and rounded once to y's dtype:
    elementwise |y - ref| <= half_ulp_ratio * (|ref| + d) + d, d = accumulate_tol * rms(ref)
    (d: the float32 accumulation's error; the rounding of y adds at most half an ulp of y)."""
    yd = y.detach().cpu().double()
    r = ref.cpu().double()
    assert bool(torch.isfinite(yd).all()), f"{what}: non-finite outputs"
    rms = float(r.square().mean().sqrt())
    assert rms > 0, f"{what}: the reference is all zeros, the check would prove nothing"
    d = accumulate_tol * rms
    limit = half_ulp_ratio(y.dtype) * (r.abs() + d) + d
    excess = (yd - r).abs() - limit
    worst = int(excess.argmax())
    assert float(excess.max()) <= 0, (
        f"{what}: element {worst} is {float(yd.view(-1)[worst]):.9g}, reference {float(r.view(-1)[worst]):.9g} "
        f"(allowed {float(limit.view(-1)[worst]):.3g}; rms {rms:.3g})"
    )


def record_error(check: str, what: str, err: float) -> None:
    """Appends a measured error to the file LOWBIT_TEST_RECORD names (benchmarks/device_run.sh sets
    it), so that a GPU run leaves how close each tight check came to its bound."""
    path = os.environ.get("LOWBIT_TEST_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{check}\t{what}\t{err:.3e}\n")
