"""torch.library.opcheck on every lowbit op: schema, fake (Meta) kernels, dynamic shapes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _helpers import DEVICES, random_weight
from lowbit import QuantType


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_dequantize(device: str, rng: np.random.Generator) -> None:
    w, _ = random_weight(QuantType.IQ2_S, 6, 512, rng, device=device)
    torch.library.opcheck(
        torch.ops.lowbit.dequantize.default, (w, int(QuantType.IQ2_S), 512), {"dtype": torch.bfloat16}
    )
    d, s = random_weight(QuantType.MXFP8_E4M3, 4, 64, rng, experts=2, device=device)
    torch.library.opcheck(torch.ops.lowbit.dequantize.default, (d, int(QuantType.MXFP8_E4M3)), {"scales": s})


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_linear(device: str, rng: np.random.Generator) -> None:
    w, _ = random_weight(QuantType.IQ3_XXS, 10, 256, rng, device=device)
    x = torch.from_numpy(rng.standard_normal((3, 256)).astype(np.float32)).to(device)
    bias = torch.randn(10, device=device)
    torch.library.opcheck(torch.ops.lowbit.linear.default, (x, w, int(QuantType.IQ3_XXS)), {"bias": bias})


def test_opcheck_quantize(rng: np.random.Generator) -> None:
    x = torch.from_numpy(rng.standard_normal((4, 64)).astype(np.float32))
    for q in (QuantType.MXFP8_E4M3, QuantType.MXFP4_SPLIT, QuantType.Q8_0):
        torch.library.opcheck(torch.ops.lowbit.quantize.default, (x, int(q)), {"scale_rule": 1})


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_fused_moe(device: str, rng: np.random.Generator) -> None:
    w13, _ = random_weight(QuantType.IQ4_NL, 64, 32, rng, experts=3, device=device)
    w2, _ = random_weight(QuantType.Q5_0, 32, 32, rng, experts=3, device=device)
    x = torch.from_numpy(rng.standard_normal((5, 32)).astype(np.float32)).to(device)
    ids = torch.from_numpy(rng.integers(-1, 4, (5, 2))).to(device)
    weights = torch.rand(5, 2, device=device)
    kwargs = {"w13_type": int(QuantType.IQ4_NL), "w2_type": int(QuantType.Q5_0), "activation": "gelu"}
    torch.library.opcheck(torch.ops.lowbit.fused_moe.default, (x, w13, w2, weights, ids), kwargs)
