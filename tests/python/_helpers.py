"""Shared test helpers: random valid quantized weights per type, float64 references, seeds."""

from __future__ import annotations

import os
import secrets

import numpy as np
import torch

import lowbit
from lowbit import QuantType

# Byte offset of the fp16 super-block scale in each GGUF type that has one at a fixed place.
FP16_D_OFFSET = {
    QuantType.Q5_0: 0,
    QuantType.Q8_0: 0,
    QuantType.IQ2_XXS: 0,
    QuantType.IQ2_XS: 0,
    QuantType.IQ2_S: 0,
    QuantType.IQ3_XXS: 0,
    QuantType.IQ3_S: 0,
    QuantType.IQ1_S: 0,
    QuantType.IQ4_NL: 0,
    QuantType.IQ4_XS: 0,
}
BLOCK = {  # (elements, bytes) per block; split types: bytes of the elements tensor
    QuantType.Q5_0: (32, 22),
    QuantType.Q8_0: (32, 34),
    QuantType.IQ2_XXS: (256, 66),
    QuantType.IQ2_XS: (256, 74),
    QuantType.IQ3_XXS: (256, 98),
    QuantType.IQ1_S: (256, 50),
    QuantType.IQ4_NL: (32, 18),
    QuantType.IQ3_S: (256, 110),
    QuantType.IQ2_S: (256, 82),
    QuantType.IQ4_XS: (256, 136),
    QuantType.IQ1_M: (256, 56),
    QuantType.MXFP4: (32, 17),
    QuantType.MXFP8_E4M3: (32, 32),
    QuantType.MXFP4_SPLIT: (32, 16),
}
IQ1M_SCALES_OFFSET = 48


def fresh_seed() -> int:
    """A new seed per call (LOWBIT_TEST_SEED pins it to reproduce a failure); printed for the log."""
    pinned = os.environ.get("LOWBIT_TEST_SEED")
    seed = int(pinned) if pinned else secrets.randbits(32)
    print(f"seed={seed}")
    return seed


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
    """IQ1_M scatters its fp16 scale over the top nibbles of its four uint16 scale words."""
    words = raw[:, IQ1M_SCALES_OFFSET : IQ1M_SCALES_OFFSET + 8].copy().view(np.uint16)
    words &= np.uint16(0x0FFF)
    for i, shift in enumerate((0, 4, 8, 12)):
        words[:, i] |= ((d_bits >> shift) & 0xF).astype(np.uint16) << 12
    raw[:, IQ1M_SCALES_OFFSET : IQ1M_SCALES_OFFSET + 8] = words.view(np.uint8)


def random_blocks(qtype: QuantType, n_blocks: int, rng: np.random.Generator, realistic: bool = True) -> np.ndarray:
    """Random bytes forming valid blocks of a GGUF type, uint8 [n_blocks, block_bytes]."""
    _, nbytes = BLOCK[qtype]
    raw = rng.integers(0, 256, (n_blocks, nbytes), dtype=np.uint8)
    d = fp16_realistic(rng, n_blocks) if realistic else fp16_any_finite(rng, n_blocks)
    if qtype in FP16_D_OFFSET:
        off = FP16_D_OFFSET[qtype]
        raw[:, off : off + 2] = d.view(np.uint8).reshape(n_blocks, 2)
    elif qtype == QuantType.IQ1_M:
        set_iq1m_scale(raw, d)
    elif qtype == QuantType.MXFP4 and realistic:
        raw[:, 0] = rng.integers(119, 128, n_blocks)
    return raw


def random_weight(
    qtype: QuantType, n: int, k: int, rng: np.random.Generator, experts: int = 0, device: str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A random valid quantized weight [N, row_bytes] (or [E, N, row_bytes]) and its split scales."""
    elems, nbytes = BLOCK[qtype]
    assert k % elems == 0
    lead = (experts, n) if experts else (n,)
    rows = int(np.prod(lead))
    if qtype in lowbit.SPLIT_MX_TYPES:
        if qtype == QuantType.MXFP8_E4M3:
            data = rng.integers(0, 256, (rows, k), dtype=np.uint8)
            data[(data & 0x7F) == 0x7F] ^= 0x01  # no NaN elements in a realistic checkpoint
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
    """||out - ref|| / ||ref|| in float64; inf when out holds NaN or inf."""
    o = out.double().cpu()
    r = ref.double().cpu()
    if not torch.isfinite(o).all():
        return float("inf")
    return float(torch.linalg.vector_norm(o - r) / torch.linalg.vector_norm(r))
