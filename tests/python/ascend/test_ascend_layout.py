"""lowbit's C++ layout ops (torch.ops.lowbit.mx_*), which the Ascend backend builds its weights with:
E8M0 scale pairing (odd K/32 padded with 0x00) and GGUF MXFP4 <-> split MXFP4 nibble order."""

from __future__ import annotations

import lowbit
import pytest
import torch
from lowbit import QuantType
from lowbit.ascend import layout


@pytest.mark.parametrize("shape", [(7, 5), (3, 4, 8), (1,), (2, 3, 4, 135)])
def test_pairing_places_block_j_at_pair_j_over_2(shape: tuple[int, ...], trng) -> None:
    scales = torch.randint(0, 256, shape, dtype=torch.uint8, generator=trng)
    paired = torch.ops.lowbit.mx_pair_scales(scales)
    blocks = shape[-1]
    assert paired.shape == (*shape[:-1], (blocks + 1) // 2, 2) and paired.dtype == torch.uint8
    for j in range(blocks):
        assert torch.equal(paired[..., j // 2, j % 2], scales[..., j])
    if blocks % 2:
        assert (paired[..., -1, 1] == 0).all()
    back = torch.ops.lowbit.mx_unpair_scales(paired, 32 * blocks)
    assert torch.equal(back, scales)
    # the e8m0 dtype is kept; the backend's wrapper hands out uint8
    assert torch.ops.lowbit.mx_pair_scales(scales.view(torch.float8_e8m0fnu)).dtype == torch.float8_e8m0fnu
    assert layout.pair_scales(scales.view(torch.float8_e8m0fnu)).dtype == torch.uint8


def test_unpair_rejects_wrong_k() -> None:
    paired = torch.full((2, 3, 2), 120, dtype=torch.uint8)  # 6 real scales: K = 192
    with pytest.raises(ValueError, match=r"paired: row 0 has padding byte 0x78 .* k is wrong"):
        torch.ops.lowbit.mx_unpair_scales(paired, 160)
    with pytest.raises(ValueError, match=r"ceil\(K/64\) = 1"):
        torch.ops.lowbit.mx_unpair_scales(paired, 64)
    with pytest.raises(ValueError, match="k: K = 4304 must be a positive multiple of 32"):
        torch.ops.lowbit.mx_unpair_scales(paired, 4304)
    with pytest.raises(ValueError, match="scales must hold E8M0 codes"):
        torch.ops.lowbit.mx_pair_scales(torch.zeros(3, 4, dtype=torch.int32))


def test_gguf_mxfp4_converts_to_split_with_the_same_values(trng) -> None:
    w = torch.randn(3, 8, 96, generator=trng)  # [E, N, K]
    blocks, _ = lowbit.quantize(w, QuantType.MXFP4)
    elements, scales = torch.ops.lowbit.mxfp4_gguf_to_split(blocks)
    assert elements.shape == (3, 8, 48) and scales.shape == (3, 8, 3)
    gguf_values = lowbit.dequantize(blocks.reshape(24, -1), QuantType.MXFP4)
    split_values = lowbit.dequantize(elements.reshape(24, -1), QuantType.MXFP4_SPLIT, scales=scales.reshape(24, -1))
    assert torch.equal(gguf_values, split_values)
    assert torch.equal(torch.ops.lowbit.mxfp4_split_to_gguf(elements, scales), blocks)
    # the nibble orders really differ: GGUF byte j holds elements j and j + 16, split byte i elements 2i, 2i + 1
    assert not torch.equal(blocks.reshape(3, 8, 3, 17)[..., 1:].reshape(3, 8, 48), elements)


def test_layout_ops_check_their_arguments() -> None:
    with pytest.raises(ValueError, match="not a whole number of 17-byte MXFP4 blocks"):
        torch.ops.lowbit.mxfp4_gguf_to_split(torch.zeros(2, 33, dtype=torch.uint8))
    with pytest.raises(ValueError, match=r"scales must have shape \[2, 2\]"):
        torch.ops.lowbit.mxfp4_split_to_gguf(
            torch.zeros(2, 32, dtype=torch.uint8), torch.zeros(2, 3, dtype=torch.uint8)
        )
    with pytest.raises(ValueError, match="elements: K = 2 \\* 24 = 48 must be a positive multiple of 32"):
        torch.ops.lowbit.mxfp4_split_to_gguf(
            torch.zeros(2, 24, dtype=torch.uint8), torch.zeros(2, 1, dtype=torch.uint8)
        )


def test_meta_kernels_give_shapes_and_opcheck_passes(trng) -> None:
    meta = torch.empty(4, 6, 7, dtype=torch.uint8, device="meta")
    assert torch.ops.lowbit.mx_pair_scales(meta).shape == (4, 6, 4, 2)
    assert torch.ops.lowbit.mx_unpair_scales(torch.empty(4, 4, 2, dtype=torch.uint8, device="meta"), 224).shape == (
        4,
        7,
    )
    e, s = torch.ops.lowbit.mxfp4_gguf_to_split(torch.empty(5, 34, dtype=torch.uint8, device="meta"))
    assert e.shape == (5, 32) and s.shape == (5, 2)
    scales = torch.randint(0, 256, (5, 3), dtype=torch.uint8, generator=trng)
    torch.library.opcheck(torch.ops.lowbit.mx_pair_scales.default, (scales,))
    torch.library.opcheck(torch.ops.lowbit.mx_unpair_scales.default, (torch.ops.lowbit.mx_pair_scales(scales), 96))
    blocks = torch.randint(0, 256, (2, 3, 34), dtype=torch.uint8, generator=trng)
    torch.library.opcheck(torch.ops.lowbit.mxfp4_gguf_to_split.default, (blocks,))
    torch.library.opcheck(torch.ops.lowbit.mxfp4_split_to_gguf.default, torch.ops.lowbit.mxfp4_gguf_to_split(blocks))


def test_alignment_rule() -> None:
    assert layout.k_alignment_problem(4096, fp4=True) is None
    assert layout.k_alignment_problem(96, fp4=False) is None  # odd K/32 is fine: the pairing pads it
    reason = layout.k_alignment_problem(4304, fp4=False)
    assert reason is not None and "K = 4304 is not a multiple of 32" in reason and "134.5" in reason
