"""lowbit.linear against a float64 reference on the decoded weight, every type, on every device."""

from __future__ import annotations

import lowbit
import numpy as np
import pytest
import torch
from _helpers import BLOCK, DEVICES, random_weight, rel_err
from lowbit import QuantType

# ||out - ref|| / ||ref|| bounds. CPU: float32 GEMM, half outputs add one rounding. CUDA (MMVQ at
# these M): weights and activations rounded to bf16, float32 accumulation.
BOUND = {
    "cpu": {torch.float32: 1e-5, torch.bfloat16: 8e-3, torch.float16: 1e-3},
    "cuda": {torch.float32: 1e-2, torch.bfloat16: 1e-2, torch.float16: 1e-2},
}


def reference(x: torch.Tensor, w: torch.Tensor, qtype: QuantType, scales, bias) -> torch.Tensor:
    wf = lowbit.dequantize(w.cpu(), qtype, scales=None if scales is None else scales.cpu()).double()
    y = x.cpu().double().reshape(-1, wf.shape[1]) @ wf.T
    if bias is not None:
        y = y + bias.cpu().double()
    return y.reshape(*x.shape[:-1], wf.shape[0])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("qtype", lowbit.WEIGHT_TYPES, ids=lambda t: t.type_name)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_linear_matches_float64_reference(
    device: str, qtype: QuantType, dtype: torch.dtype, rng: np.random.Generator
) -> None:
    elems, _ = BLOCK[qtype]
    n, k = 37, 2 * max(elems, 256)  # N not a multiple of any tile, several blocks per row
    w, scales = random_weight(qtype, n, k, rng, device=device)
    x = torch.from_numpy(rng.standard_normal((2, 3, k)).astype(np.float32)).to(device, dtype)
    bias = torch.from_numpy(rng.standard_normal(n).astype(np.float32)).to(device)
    y = lowbit.linear(x, w, qtype, scales=scales, bias=bias)
    assert y.shape == (2, 3, n) and y.dtype == dtype and y.device.type == device
    assert rel_err(y, reference(x, w, qtype, scales, bias)) < BOUND[device][dtype]


@pytest.mark.parametrize("qtype", [QuantType.IQ4_NL, QuantType.Q8_0, QuantType.MXFP4], ids=lambda t: t.type_name)
def test_linear_with_a_single_block_row(qtype: QuantType, rng: np.random.Generator) -> None:
    w, scales = random_weight(qtype, 5, 32, rng)
    x = torch.from_numpy(rng.standard_normal((4, 32)).astype(np.float32))
    assert rel_err(lowbit.linear(x, w, qtype, scales=scales), reference(x, w, qtype, scales, None)) < 1e-5


def test_linear_accepts_names_ids_and_enum(rng: np.random.Generator) -> None:
    w, _ = random_weight(QuantType.IQ3_S, 4, 256, rng)
    x = torch.from_numpy(rng.standard_normal((1, 256)).astype(np.float32))
    a = lowbit.linear(x, w, QuantType.IQ3_S)
    assert torch.equal(a, lowbit.linear(x, w, "iq3_s"))
    assert torch.equal(a, lowbit.linear(x, w, 21))
