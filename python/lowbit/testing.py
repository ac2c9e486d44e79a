"""Random valid quantized weights, for lowbit's tests and benchmarks (and yours).

Real checkpoints are not needed to exercise a decoder: random bytes are valid blocks of every
format once the scale fields hold sensible values. `realistic=True` puts fp16 super-block scales
in [2^-9, 2^-7) and E8M0 exponents near 2^-5..2^0, so outputs stay finite in every float type.
"""

from __future__ import annotations

import numpy as np
import torch

from ._types import SPLIT_MX_TYPES, WEIGHT_TYPES, QuantType, block_layout

# (elements, bytes) of a block; for split MX types, bytes of the elements tensor
BLOCK: dict[QuantType, tuple[int, int]] = {t: block_layout(t) for t in WEIGHT_TYPES}
# GGUF types whose fp16 super-block scale sits in bytes 0..1 of the block
_FP16_D_AT_0 = {
    QuantType.Q5_0,
    QuantType.Q8_0,
    QuantType.IQ2_XXS,
    QuantType.IQ2_XS,
    QuantType.IQ2_S,
    QuantType.IQ3_XXS,
    QuantType.IQ3_S,
    QuantType.IQ1_S,
    QuantType.IQ4_NL,
    QuantType.IQ4_XS,
}
IQ1M_SCALES_OFFSET = 48  # IQ1_M scatters its fp16 scale over the top nibbles of 4 words here


def fp16_any_finite(rng: np.random.Generator, n: int) -> np.ndarray:
    """fp16 bit patterns spanning zero, subnormal and normal values of both signs (no inf/nan)."""
    exp = rng.integers(0, 31, n, dtype=np.uint16)
    man = rng.integers(0, 1024, n, dtype=np.uint16)
    sign = rng.integers(0, 2, n, dtype=np.uint16)
    return (sign << 15) | (exp << 10) | man


def fp16_realistic(rng: np.random.Generator, n: int) -> np.ndarray:
    """Scales like real checkpoints hold: |d| in [2^-9, 2^-7), either sign."""
    d = rng.uniform(2.0**-9, 2.0**-7, n) * rng.choice([-1.0, 1.0], n)
    return d.astype(np.float16).view(np.uint16)


def set_iq1m_scale(raw: np.ndarray, d_bits: np.ndarray) -> None:
    """Writes fp16 scales (bit patterns) into IQ1_M blocks raw [n, 56]."""
    words = raw[:, IQ1M_SCALES_OFFSET : IQ1M_SCALES_OFFSET + 8].copy().view(np.uint16)
    words &= np.uint16(0x0FFF)
    for i, shift in enumerate((0, 4, 8, 12)):
        words[:, i] |= ((d_bits >> shift) & 0xF).astype(np.uint16) << 12
    raw[:, IQ1M_SCALES_OFFSET : IQ1M_SCALES_OFFSET + 8] = words.view(np.uint8)


def random_blocks(qtype: QuantType, n_blocks: int, rng: np.random.Generator, realistic: bool = True) -> np.ndarray:
    """Random bytes forming valid blocks of a GGUF type: uint8 [n_blocks, block_bytes]."""
    _, nbytes = BLOCK[qtype]
    raw = rng.integers(0, 256, (n_blocks, nbytes), dtype=np.uint8)
    d = fp16_realistic(rng, n_blocks) if realistic else fp16_any_finite(rng, n_blocks)
    if qtype in _FP16_D_AT_0:
        raw[:, 0:2] = d.view(np.uint8).reshape(n_blocks, 2)
    elif qtype == QuantType.IQ1_M:
        set_iq1m_scale(raw, d)
    elif qtype == QuantType.MXFP4 and realistic:
        raw[:, 0] = rng.integers(119, 128, n_blocks)
    return raw


def random_weight(
    qtype: QuantType, n: int, k: int, rng: np.random.Generator, experts: int = 0, device: str | torch.device = "cpu"
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A random valid weight uint8 [N, row_bytes] (or [E, N, row_bytes]) and its split scales (or None)."""
    elems, nbytes = BLOCK[qtype]
    if k % elems:
        raise ValueError(f"k: {k} is not a multiple of the {qtype.type_name} block ({elems})")
    lead = (experts, n) if experts else (n,)
    rows = int(np.prod(lead))
    if qtype in SPLIT_MX_TYPES:
        if qtype == QuantType.MXFP8_E4M3:
            data = rng.integers(0, 256, (rows, k), dtype=np.uint8)
            data[(data & 0x7F) == 0x7F] ^= 0x01  # E4M3 NaN codes do not occur in checkpoints
        else:
            data = rng.integers(0, 256, (rows, k // 2), dtype=np.uint8)
        scales = rng.integers(118, 129, (rows, k // 32), dtype=np.uint8)
        return (
            torch.from_numpy(data).reshape(*lead, -1).to(device),
            torch.from_numpy(scales).reshape(*lead, -1).to(device),
        )
    blocks = random_blocks(qtype, rows * (k // elems), rng)
    return torch.from_numpy(blocks).reshape(*lead, (k // elems) * nbytes).to(device), None


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64 (on out's device); inf when out holds NaN or inf."""
    o = out.double()
    r = ref.to(o.device).double()
    if not bool(torch.isfinite(o).all()):
        return float("inf")
    return float(torch.linalg.vector_norm(o - r) / torch.linalg.vector_norm(r))
