"""lowbit.fused_moe against a float64 per-token reference: pure and mixed types, activations,
invalid and non-local expert ids."""

from __future__ import annotations

import math

import lowbit
import numpy as np
import pytest
import torch
from _helpers import DEVICES, random_weight, rel_err
from lowbit import QuantType
from lowbit.moe import moe_layer

# CUDA rounds the activations and act(gate) * up to bf16 and, on the vector path and the grouped
# MMQ's int8 tiles, quantizes the projections' activations to int8 per 32 values (test_moe_cuda.py
# checks each path tightly against a reference that rounds the same way): held to the dense int8
# MMVQ's end-to-end bound (test_cuda_kernels.py: MMVQ_INT8_BOUND). The CUDA cases run each route
# (the dispatcher's, the vector and the batched kernel). The CPU composite computes in float32.
CUDA_BOUND = 3e-2


def act(name: str, v: torch.Tensor) -> torch.Tensor:
    if name == "silu":
        return v / (1 + torch.exp(-v))
    if name == "gelu":
        return 0.5 * v * (1 + torch.erf(v / math.sqrt(2)))
    c = math.sqrt(2 / math.pi)
    return 0.5 * v * (1 + torch.tanh(c * (v + 0.044715 * v**3)))


def reference(x, w13, w2, weights, ids, t13, t2, activation, s13, s2, begin=0) -> torch.Tensor:
    W13 = lowbit.dequantize(w13.cpu(), t13, scales=None if s13 is None else s13.cpu()).double()
    W2 = lowbit.dequantize(w2.cpu(), t2, scales=None if s2 is None else s2.cpu()).double()
    E, two_i, _ = W13.shape
    inter = two_i // 2
    xs, out = x.cpu().double(), torch.zeros(x.shape, dtype=torch.float64)
    for t in range(x.shape[0]):
        for j in range(ids.shape[1]):
            e = int(ids[t, j]) - begin
            if not 0 <= e < E:
                continue
            h = W13[e] @ xs[t]
            out[t] += float(weights[t, j]) * (W2[e] @ (act(activation, h[:inter]) * h[inter:]))
    return out


def routing(rng: np.random.Generator, tokens: int, experts: int, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    ids = np.stack([rng.choice(experts, top_k, replace=False) for _ in range(tokens)])
    weights = rng.random((tokens, top_k)).astype(np.float32)
    return torch.from_numpy(weights / weights.sum(1, keepdims=True)), torch.from_numpy(ids)


def routes(device: str) -> list[str]:
    """The dispatcher's route, and on CUDA each kernel forced (the dispatcher picks by pairs per
    expert, so small tests would otherwise reach one of them only)."""
    return ["auto", "moe_vec", "moe_batched"] if device == "cuda" else ["auto"]


def fused(route: str, x, w13, w2, weights, ids, **kw) -> torch.Tensor:
    if route == "auto":
        return lowbit.fused_moe(x, w13, w2, weights, ids, **kw)
    return moe_layer(x, w13, w2, weights, ids, route=route, **kw)


CASES = [
    (QuantType.IQ2_XXS, QuantType.IQ2_XXS),
    (QuantType.IQ3_S, QuantType.Q5_0),  # mixed, as in the seed's MoE fixture
    (QuantType.IQ4_XS, QuantType.Q8_0),
    (QuantType.IQ1_M, QuantType.IQ4_NL),
    (QuantType.MXFP4, QuantType.MXFP4),
    (QuantType.MXFP8_E4M3, QuantType.MXFP4_SPLIT),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("t13", "t2"), CASES, ids=lambda t: t.type_name)
@pytest.mark.parametrize("activation", ["silu", "gelu", "gelu_tanh"])
def test_fused_moe_matches_reference(device, t13, t2, activation, rng: np.random.Generator) -> None:
    tokens, hidden, inter, experts, top_k = 9, 256, 256, 5, 2
    w13, s13 = random_weight(t13, 2 * inter, hidden, rng, experts=experts, device=device)
    w2, s2 = random_weight(t2, hidden, inter, rng, experts=experts, device=device)
    x = torch.from_numpy(rng.standard_normal((tokens, hidden)).astype(np.float32)).to(device)
    weights, ids = routing(rng, tokens, experts, top_k)
    ref = reference(x, w13, w2, weights, ids, t13, t2, activation, s13, s2)
    kw = {"w13_type": t13, "w2_type": t2, "activation": activation, "w13_scales": s13, "w2_scales": s2}
    for route in routes(device):
        out = fused(route, x, w13, w2, weights.to(device), ids.to(device), **kw)
        assert out.shape == x.shape and out.dtype == x.dtype
        assert rel_err(out, ref) < (1e-5 if device == "cpu" else CUDA_BOUND), route


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("ids_dtype", [torch.int32, torch.int64], ids=str)
def test_invalid_and_non_local_ids_contribute_exactly_zero(device, ids_dtype, rng: np.random.Generator) -> None:
    tokens, hidden, inter, local, top_k = 6, 256, 256, 3, 3
    begin = 4  # this rank holds global experts [4, 7)
    t13, t2 = QuantType.IQ3_XXS, QuantType.IQ4_NL
    w13, _ = random_weight(t13, 2 * inter, hidden, rng, experts=local, device=device)
    w2, _ = random_weight(t2, hidden, inter, rng, experts=local, device=device)
    x = torch.from_numpy(rng.standard_normal((tokens, hidden)).astype(np.float32)).to(device, torch.bfloat16)
    ids = torch.tensor([[4, 5, 6], [-1, 5, 100], [0, 3, 7], [-1, -1, -1], [6, 2, -7], [9, 4, 5]], dtype=ids_dtype)
    weights = torch.from_numpy(rng.random((tokens, top_k)).astype(np.float32))
    ref = reference(x.float(), w13, w2, weights, ids, t13, t2, "silu", None, None, begin)
    # a local id next to invalid ones gives that expert's contribution alone
    single = reference(
        x.float()[1:2], w13, w2, weights[1:2], torch.tensor([[-1, 5, -1]]), t13, t2, "silu", None, None, begin
    )
    kw = {"w13_type": t13, "w2_type": t2, "expert_range": (begin, begin + local)}
    for route in routes(device):
        out = fused(route, x, w13, w2, weights.to(device), ids.to(device), **kw)
        assert torch.equal(out[2].cpu(), torch.zeros(hidden, dtype=out.dtype)), route  # ids 0, 3, 7: none local
        assert torch.equal(out[3].cpu(), torch.zeros(hidden, dtype=out.dtype)), route  # all -1
        assert rel_err(out, ref) < (8e-3 if device == "cpu" else CUDA_BOUND), route  # bf16 output
        assert rel_err(out[1:2], single) < (8e-3 if device == "cpu" else CUDA_BOUND), route


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("activation", ["silu", "gelu", "gelu_tanh"])
def test_mixed_ids_match_the_float64_reference_tightly(device, activation, rng: np.random.Generator) -> None:
    """The torch composite (the ops' MoE) against the float64 reference at float32 precision with the
    id table of the C++ reference's test (tests/cpp/test_reference_layers.cpp; cpu::fused_moe is not
    reachable from Python, both are held to the same maths): every local expert, the last alone,
    -1, past the last, other ranks' ids and one expert in two slots."""
    begin, local, hidden, inter = 3, 5, 256, 256
    t13, t2 = QuantType.IQ4_XS, QuantType.MXFP4_SPLIT
    w13, s13 = random_weight(t13, 2 * inter, hidden, rng, experts=local, device=device)
    w2, s2 = random_weight(t2, hidden, inter, rng, experts=local, device=device)
    last = begin + local - 1
    ids = torch.tensor(
        [
            [begin, begin + 1, begin + 2],
            [-1, last, begin + local],
            [begin - 1, -1, 1000],
            [last, begin + 3, begin + 1],
            [begin + 3, begin + 3, -1],
            [last, -7, begin + local + 5],
        ]
    )
    x = torch.from_numpy(rng.standard_normal((ids.shape[0], hidden)).astype(np.float32) * 8).to(device)
    weights = torch.from_numpy(rng.uniform(0.1, 1.0, ids.shape).astype(np.float32))
    out = lowbit.fused_moe(
        x,
        w13,
        w2,
        weights.to(device),
        ids.to(device),
        w13_type=t13,
        w2_type=t2,
        activation=activation,
        w13_scales=s13,
        w2_scales=s2,
        expert_range=(begin, begin + local),
    )
    ref = reference(x, w13, w2, weights, ids, t13, t2, activation, s13, s2, begin)
    assert torch.equal(out[2].cpu(), torch.zeros(hidden))  # nothing local: exact zeros
    for t in range(ids.shape[0]):
        if t != 2:  # the CPU: float32 throughout; CUDA: bf16 activations and act(gate) * up (CUDA_BOUND)
            assert rel_err(out[t], ref[t]) < (1e-5 if device == "cpu" else CUDA_BOUND), f"token {t}"
