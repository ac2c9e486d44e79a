"""The emulator's own MX arithmetic (ascend-npu-ops.md sections 1, 2, 6), written from the facts doc.

Deliberately independent of lowbit's codecs: scales come from ``torch.frexp`` exponents, FP8 elements
from torch's float8 casts after saturation, FP4 elements from explicit rounding to the E2M1 grid.
All element math runs in float64, where dividing by a power-of-two scale is exact.
"""

from __future__ import annotations

import torch

from ._dtypes import FP4X2

ELEMENT_MAX = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0, FP4X2: 6.0}
ELEMENT_EMAX = {"float8_e4m3fn": 8, "float8_e5m2": 15, FP4X2: 2}
NAN_CODE = 0xFF

# E2M1 code (sign bit 0x8 | magnitude index) -> value.
FP4_VALUES = torch.tensor(
    [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=torch.float64
)
_FP4_MAGNITUDES = FP4_VALUES[:8]


def floor_log2(a: torch.Tensor) -> torch.Tensor:
    """floor(log2(a)) of positive finite float64 values, exactly (frexp: a = m * 2^e, m in [0.5, 1))."""
    _, e = torch.frexp(a)
    return e.to(torch.int64) - 1


def _is_power_of_two(a: torch.Tensor) -> torch.Tensor:
    m, _ = torch.frexp(a)
    return m == 0.5


def scale_codes(amax: torch.Tensor, rule: str, element: str, *, max_low_bound: float = 0.0) -> torch.Tensor:
    """E8M0 codes (uint8) of blocks whose largest magnitude is ``amax`` (float64).

    Rules:
      - "ocp_floor" (npu_dynamic_mx_quant scale_alg=0, section 1): floor(log2 amax) - emax; below 2^-127
        clamps to code 0; above 2^127, Inf or NaN gives 0xFF; a zero block gets 0.
      - "round_scale" (init-routing MXFP8 RoundScale, section 2): ceil(log2(amax / max)) with the
        quotient in float32 (exponent, +1 for a non-zero mantissa), minimum -126; amax 0 -> code 0.
      - "round_up" (npu_dynamic_mx_quant scale_alg=1, FP8 only): the E8M0 exponent of amax / max
        rounded up, amax first clamped below by ``max_low_bound``.
    """
    amax = amax.to(torch.float64)
    finite = torch.isfinite(amax)
    safe = torch.where(finite & (amax > 0), amax, torch.ones_like(amax))
    if rule == "ocp_floor":
        e = floor_log2(safe) - ELEMENT_EMAX[element]
        e = torch.clamp(e, min=-127)
    elif rule in ("round_scale", "round_up"):
        if rule == "round_up" and max_low_bound > 0:
            safe = torch.clamp(safe, min=max_low_bound)
        quotient = (safe.to(torch.float32) / ELEMENT_MAX[element]).to(torch.float64)
        e = floor_log2(quotient) + (~_is_power_of_two(quotient)).to(torch.int64)
        tiny = quotient < 2.0**-126
        if rule == "round_scale":
            e = torch.clamp(e, min=-126)
        else:  # E8M0 subnormal range: round up when the fraction of 2^-127 is above one half
            e = torch.where(tiny, torch.where(quotient > 2.0**-127, -126, -127), e)
    else:
        raise ValueError(f"unknown scale rule {rule!r}")
    codes = e + 127
    codes = torch.where(e > 127, NAN_CODE, codes)
    codes = torch.where(finite, codes, NAN_CODE)
    codes = torch.where(finite & (amax == 0), 0, codes)
    return codes.to(torch.uint8)


def e8m0_to_float(codes: torch.Tensor) -> torch.Tensor:
    """2^(code - 127) as float64; 0xFF is NaN."""
    c = codes.view(torch.uint8).to(torch.int64) if codes.dtype == torch.float8_e8m0fnu else codes.to(torch.int64)
    value = torch.ldexp(torch.ones_like(c, dtype=torch.float64), c - 127)
    return torch.where(c == NAN_CODE, torch.nan, value)


def _scaled(x: torch.Tensor, codes: torch.Tensor, block: int) -> torch.Tensor:
    """x / block scale, element-wise, float64. Blocks with code 0 (the kernel zeroes the reciprocal) or
    0xFF (NaN scale) give 0, and so do NaN elements (the golden's nan_to_num)."""
    per_element = codes.to(torch.int64).repeat_interleave(block, dim=-1)[..., : x.shape[-1]]
    v = torch.ldexp(x.to(torch.float64), 127 - per_element)
    v = torch.where((per_element == 0) | (per_element == NAN_CODE), 0.0, v)
    return torch.nan_to_num(v, nan=0.0)


def encode_fp8(v: torch.Tensor, element: str) -> torch.Tensor:
    """Saturating round-half-even cast of float64 values to a torch float8 dtype (subnormals kept)."""
    limit = ELEMENT_MAX[element]
    clamped = torch.clamp(v, -limit, limit)
    # float64 -> float32 is exact here (values are bf16/fp16/fp32 inputs times powers of two).
    return clamped.to(torch.float32).to(getattr(torch, element))


def encode_fp4(v: torch.Tensor, round_mode: str) -> torch.Tensor:
    """E2M1 codes (uint8, one per element) of float64 values: private exponent max(floor(log2|v|), 0),
    one mantissa bit, rounding per ``round_mode`` ("rint" half-even, "round" half away from zero,
    "floor" toward -inf), saturating at +-6. Zero results are encoded +0."""
    a = v.abs()
    e = torch.where(a > 0, floor_log2(torch.where(a > 0, a, torch.ones_like(a))), 0).clamp(min=0)
    step = torch.ldexp(torch.ones_like(a), e - 1)
    q = v / step
    if round_mode == "rint":
        q = torch.round(q)
    elif round_mode == "round":
        q = torch.sign(q) * torch.floor(q.abs() + 0.5)
    elif round_mode == "floor":
        q = torch.floor(q)
    else:
        raise ValueError(f"round_mode: FP4 supports 'rint', 'round' and 'floor', got {round_mode!r}")
    value = torch.clamp(q * step, -6.0, 6.0)
    magnitude_index = torch.searchsorted(_FP4_MAGNITUDES, value.abs())
    sign = ((value < 0) & (magnitude_index > 0)).to(torch.int64) << 3
    return (magnitude_index | sign).to(torch.uint8)


def decode_fp4(codes: torch.Tensor) -> torch.Tensor:
    return FP4_VALUES[codes.to(torch.int64)]


def pack_fp4(codes: torch.Tensor) -> torch.Tensor:
    """Codes [..., 2L] -> bytes [..., L]; the even-index element goes to the low nibble."""
    if codes.shape[-1] % 2:
        raise ValueError(f"FP4 packing needs an even last dim, got {tuple(codes.shape)}")
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).to(torch.uint8)


def unpack_fp4(packed: torch.Tensor) -> torch.Tensor:
    """Bytes [..., L] -> codes [..., 2L] (low nibble first)."""
    b = packed.view(torch.uint8) if packed.dtype != torch.uint8 else packed
    return torch.stack([b & 0x0F, b >> 4], dim=-1).reshape(*b.shape[:-1], 2 * b.shape[-1])


def block_amax(x: torch.Tensor, block: int) -> torch.Tensor:
    """Largest magnitude of each ``block`` elements of the last dim (zero-padded tail), float64.
    A NaN anywhere in a block makes its amax NaN."""
    length = x.shape[-1]
    blocks = -(-length // block)
    padded = torch.nn.functional.pad(x.to(torch.float64), (0, blocks * block - length))
    a = padded.reshape(*x.shape[:-1], blocks, block).abs()
    has_nan = torch.isnan(a).any(dim=-1)
    return torch.where(has_nan, torch.nan, torch.nan_to_num(a, nan=0.0).amax(dim=-1))


def mx_quantize_last(
    x: torch.Tensor,
    element: str,
    *,
    rule: str,
    round_mode: str = "rint",
    block: int = 32,
    max_low_bound: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """MX-quantize along the last dim. Returns (elements, codes): elements are a float8 tensor of x's
    shape, or uint8 E2M1 codes (unpacked, x's shape) for FP4; codes are uint8 [..., ceil(L/block)]."""
    codes = scale_codes(block_amax(x, block), rule, element, max_low_bound=max_low_bound)
    v = _scaled(x, codes, block)
    if element == FP4X2:
        return encode_fp4(v, round_mode), codes
    if round_mode != "rint":
        raise ValueError(f"round_mode: FP8 destinations support only 'rint', got {round_mode!r}")
    return encode_fp8(v, element), codes


def pair_last(codes: torch.Tensor) -> torch.Tensor:
    """[..., nb] -> [..., ceil(nb/2), 2]; block j at [..., j // 2, j % 2], odd counts padded with 0x00."""
    nb = codes.shape[-1]
    padded = torch.nn.functional.pad(codes, (0, nb % 2))
    return padded.reshape(*codes.shape[:-1], (nb + 1) // 2, 2)


def unpair_last(paired: torch.Tensor, blocks: int) -> torch.Tensor:
    """[..., G, 2] -> [..., blocks] (drops the padding)."""
    return paired.reshape(*paired.shape[:-2], paired.shape[-2] * 2)[..., :blocks]


def dequantize_last(values: torch.Tensor, codes: torch.Tensor, block: int = 32) -> torch.Tensor:
    """Element values (float64, [..., L]) times their block scales (codes [..., >= ceil(L/block)])."""
    length = values.shape[-1]
    scale = e8m0_to_float(codes).repeat_interleave(block, dim=-1)[..., :length]
    return values * scale
