"""Every GGUF type decodes bit-exact in float32 against ggml's reference (gguf-py's numpy port)."""

from __future__ import annotations

import lowbit
import numpy as np
import pytest
import torch
from _helpers import BLOCK, gguf_module, random_blocks
from lowbit import QuantType

N_BLOCKS = 10_000


def ggml_reference(raw: np.ndarray, qtype: QuantType) -> np.ndarray:
    """gguf-py's dequantization; each caller needing it skips (fails in CI) alone where gguf is missing."""
    gguf_quants = gguf_module("gguf.quants")
    ggml_type = gguf_module("gguf.constants").GGMLQuantizationType(int(qtype))
    with np.errstate(over="ignore", invalid="ignore"):
        return gguf_quants.dequantize(raw.reshape(-1), ggml_type).astype(np.float32).reshape(-1)


def assert_bits_equal(got: np.ndarray, ref: np.ndarray, what: str) -> None:
    same = (got.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(got) & np.isnan(ref))
    bad = np.flatnonzero(~same)
    assert bad.size == 0, (
        f"{what}: {bad.size} of {got.size} values differ; first at {bad[:5]}: {got[bad[:5]]} vs {ref[bad[:5]]}"
    )


@pytest.mark.parametrize("qtype", lowbit.GGUF_WEIGHT_TYPES, ids=lambda t: t.type_name)
def test_decode_bit_exact_any_scale(qtype: QuantType, rng: np.random.Generator) -> None:
    # fp16 scale fields span zero, subnormal and normal values of both signs; other bytes random
    raw = random_blocks(qtype, N_BLOCKS, rng, realistic=False)
    elems, _ = BLOCK[qtype]
    k = elems * 100  # 100 blocks per row: real multi-block rows
    w = torch.from_numpy(raw).reshape(N_BLOCKS // 100, -1)
    got = lowbit.dequantize(w, qtype, k).numpy().reshape(-1)
    assert_bits_equal(got, ggml_reference(raw, qtype), qtype.type_name)


@pytest.mark.parametrize("qtype", lowbit.GGUF_WEIGHT_TYPES, ids=lambda t: t.type_name)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_outputs_round_the_float32_values(qtype: QuantType, dtype: torch.dtype, rng: np.random.Generator) -> None:
    raw = random_blocks(qtype, 512, rng)
    w = torch.from_numpy(raw).reshape(16, -1)
    f32 = lowbit.dequantize(w, qtype)
    half = lowbit.dequantize(w, qtype, dtype=dtype)
    assert half.dtype == dtype
    assert torch.equal(half, f32.to(dtype))


@pytest.mark.parametrize(
    "qtype", [QuantType.IQ2_XXS, QuantType.IQ4_NL, QuantType.MXFP8_E4M3], ids=lambda t: t.type_name
)
def test_three_d_weights_decode_per_expert(qtype: QuantType, rng: np.random.Generator) -> None:
    from _helpers import random_weight

    w, s = random_weight(qtype, 8, 512, rng, experts=3)
    full = lowbit.dequantize(w, qtype, scales=s)
    assert full.shape == (3, 8, 512)
    for e in range(3):
        one = lowbit.dequantize(w[e], qtype, scales=None if s is None else s[e])
        assert torch.equal(full[e], one)


def test_iq1_m_scattered_scale_is_used(rng: np.random.Generator) -> None:
    raw = random_blocks(QuantType.IQ1_M, 64, rng)
    w = torch.from_numpy(raw).reshape(1, -1)
    base = lowbit.dequantize(w, QuantType.IQ1_M)
    doubled = raw.copy()
    # raise the scattered fp16 exponent by one: every weight doubles
    words = doubled[:, 48:56].copy().view(np.uint16)
    d = (words[:, 0] >> 12) | ((words[:, 1] >> 8) & 0xF0) | ((words[:, 2] >> 4) & 0xF00) | (words[:, 3] & 0xF000)
    d = (d.astype(np.uint32) + (1 << 10)).astype(np.uint16)
    from _helpers import set_iq1m_scale

    set_iq1m_scale(doubled, d)
    twice = lowbit.dequantize(torch.from_numpy(doubled).reshape(1, -1), QuantType.IQ1_M)
    assert torch.equal(twice, base * 2)
