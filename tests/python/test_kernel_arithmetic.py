"""The emulated kernel arithmetic the GPU tests compare with (_kernel_arithmetic.py), checked on
the CPU: its scales reproduce every type's float32 decode bit for bit (it asserts so), its bf16
weights round m * bf16(s) once, and the bound helper passes a correct rounding and fails a wrong one."""

from __future__ import annotations

import lowbit
import numpy as np
import pytest
import torch
from _helpers import BLOCK, random_weight
from _kernel_arithmetic import assert_rounded_result, group_scales, kernel_bf16_weights
from lowbit import QuantType

POWER_OF_TWO_SCALES = {QuantType.MXFP4, QuantType.MXFP4_SPLIT, QuantType.MXFP8_E4M3}


@pytest.mark.parametrize("qtype", lowbit.WEIGHT_TYPES, ids=lambda t: t.type_name)
def test_kernel_bf16_weights_of_every_type(qtype: QuantType, rng: np.random.Generator) -> None:
    elems, _ = BLOCK[qtype]
    n, k = 64, 8 * max(elems, 256)
    w, s = random_weight(qtype, n, k, rng)
    emulated = kernel_bf16_weights(qtype, w, s)  # asserts that the scales give back the decode
    decoded = lowbit.dequantize(w, qtype, scales=s).double()
    assert emulated.shape == (n, k)
    assert torch.equal(emulated.to(torch.bfloat16).double(), emulated), "not bf16 values"
    if qtype in POWER_OF_TWO_SCALES:  # a power-of-two scale rounds nothing: the float32 decode itself
        assert torch.equal(emulated, decoded)
        return
    # otherwise within one bf16 rounding of the scale and one of the product of the decode
    assert float(((emulated - decoded).abs() - 2.0**-7 * decoded.abs()).max()) <= 0
    # and not merely bf16 of the float32 decode (the scale's own rounding shows in some weights)
    assert not torch.equal(emulated, decoded.float().to(torch.bfloat16).double())


def test_bf16_weight_of_one_q8_0_block_by_hand() -> None:
    block = np.zeros(34, dtype=np.uint8)
    block[0:2] = np.array([0.1], dtype=np.float16).view(np.uint8)
    codes = np.array([3, -77, 127, -128] + [0] * 28, dtype=np.int8)
    block[2:] = codes.view(np.uint8)
    w = torch.from_numpy(block).reshape(1, 34)
    s = np.float32(np.float16(0.1))
    assert group_scales(QuantType.Q8_0, w, None)[0, 0] == s
    s_bf16 = float(torch.tensor(float(s)).to(torch.bfloat16))  # 0.0999755859375 -> 0.10009765625
    expected = [float(torch.tensor(c * s_bf16, dtype=torch.float64).float().to(torch.bfloat16)) for c in codes[:4]]
    assert kernel_bf16_weights(QuantType.Q8_0, w)[0, :4].tolist() == expected


def test_rounded_result_bound_passes_the_rounding_and_fails_a_bug(rng: np.random.Generator) -> None:
    ref = torch.from_numpy(rng.standard_normal(4096))
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        assert_rounded_result(ref.float().to(dtype), ref, 1e-6, str(dtype))
        wrong = ref.clone()
        wrong[77] *= 1.02  # one output 2% off: more than half an ulp even of bf16
        with pytest.raises(AssertionError, match="element 77"):
            assert_rounded_result(wrong.float().to(dtype), ref, 1e-6, str(dtype))
