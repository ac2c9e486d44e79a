"""torch.compile(fullgraph=True) with the default Inductor backend, for every lowbit op: the
compiled call matches the eager one (servers compile their models with Inductor). CPU always;
CUDA variants skip without a GPU."""

from __future__ import annotations

from collections.abc import Callable

import lowbit
import numpy as np
import pytest
import torch
from _helpers import random_weight
from lowbit import QuantType, compat

DEVICES = [
    "cpu",
    pytest.param(
        "cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
    ),
]


def compiled_matches_eager(fn: Callable[..., object], *args: object) -> None:
    """Compiles fn with Inductor (no graph breaks allowed) and compares it with the eager call."""
    torch._dynamo.reset()
    eager = fn(*args)
    compiled = torch.compile(fn, fullgraph=True, backend="inductor")(*args)
    eager_t = eager if isinstance(eager, tuple) else (eager,)
    compiled_t = compiled if isinstance(compiled, tuple) else (compiled,)
    assert len(eager_t) == len(compiled_t)
    assert isinstance(eager_t[0], torch.Tensor) and eager_t[0].numel() > 0
    for e, c in zip(eager_t, compiled_t, strict=True):
        if isinstance(e, torch.Tensor):
            assert c.shape == e.shape and c.dtype == e.dtype and c.device == e.device
            # Inductor may fuse the float epilogue differently: a few float32 ulps
            torch.testing.assert_close(c, e, rtol=1e-5, atol=1e-6, equal_nan=True)
        else:
            assert c == e


def randn(rng: np.random.Generator, *shape: int, device: str = "cpu") -> torch.Tensor:
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(device)


@pytest.mark.parametrize("device", DEVICES)
def test_linear_with_a_type_name(device: str, rng: np.random.Generator) -> None:
    # the reproducer: the schema argument once named `kernel` broke Inductor's lowering
    w, _ = random_weight(QuantType.IQ4_NL, 40, 64, rng, device=device)
    compiled_matches_eager(lambda x, w: lowbit.linear(x, w, "iq4_nl"), randn(rng, 2, 64, device=device), w)


@pytest.mark.parametrize("device", DEVICES)
def test_linear_with_bias_scales_and_a_forced_route(device: str, rng: np.random.Generator) -> None:
    d, s = random_weight(QuantType.MXFP8_E4M3, 24, 96, rng, device=device)
    bias = randn(rng, 24, device=device)
    route = "cpu_reference" if device == "cpu" else "dequant_matmul"
    x = randn(rng, 3, 5, 96, device=device).to(torch.bfloat16)
    compiled_matches_eager(
        lambda x, d, s, b: torch.ops.lowbit.linear(x, d, int(QuantType.MXFP8_E4M3), scales=s, bias=b, route=route),
        x,
        d,
        s,
        bias,
    )


@pytest.mark.parametrize("device", DEVICES)
def test_dequantize(device: str, rng: np.random.Generator) -> None:
    w, _ = random_weight(QuantType.IQ2_XS, 3, 512, rng, experts=2, device=device)
    compiled_matches_eager(lambda w: lowbit.dequantize(w, "iq2_xs", 512, dtype=torch.bfloat16) * 2, w)


@pytest.mark.parametrize("device", DEVICES)
def test_mmvq(device: str, rng: np.random.Generator) -> None:
    w, _ = random_weight(QuantType.IQ3_S, 20, 256, rng, device=device)
    x = randn(rng, 5, 256, device=device)
    compiled_matches_eager(lambda x, w: torch.ops.lowbit.mmvq(x, w, int(QuantType.IQ3_S), math="bf16"), x, w)


def test_quantize(rng: np.random.Generator) -> None:
    x = randn(rng, 6, 64)
    compiled_matches_eager(lambda x: torch.ops.lowbit.quantize(x, int(QuantType.MXFP4_SPLIT), scale_rule=1), x)
    compiled_matches_eager(lambda x: torch.ops.lowbit.quantize(x, int(QuantType.Q8_0)), x)


@pytest.mark.parametrize("device", DEVICES)
def test_fused_moe(device: str, rng: np.random.Generator) -> None:
    w13, _ = random_weight(QuantType.IQ4_XS, 64, 256, rng, experts=3, device=device)
    w2, _ = random_weight(QuantType.Q5_0, 256, 32, rng, experts=3, device=device)
    x = randn(rng, 5, 256, device=device)
    ids = torch.from_numpy(rng.integers(-1, 4, (5, 2))).to(device)
    weights = torch.rand(5, 2, device=device)
    compiled_matches_eager(
        lambda x, a, b, tw, ti: lowbit.fused_moe(x, a, b, tw, ti, w13_type="iq4_xs", w2_type="q5_0"),
        x,
        w13,
        w2,
        weights,
        ids,
    )


def test_mx_layout_ops(rng: np.random.Generator) -> None:
    x = randn(rng, 4, 96)
    elements, scales = lowbit.quantize(x, "mxfp4_split")
    assert scales is not None
    compiled_matches_eager(lambda s: torch.ops.lowbit.mx_pair_scales(s), scales)
    paired = torch.ops.lowbit.mx_pair_scales(scales)
    compiled_matches_eager(lambda p: torch.ops.lowbit.mx_unpair_scales(p, 96), paired)
    compiled_matches_eager(lambda e, s: torch.ops.lowbit.mxfp4_split_to_gguf(e, s), elements, scales)
    blocks = torch.ops.lowbit.mxfp4_split_to_gguf(elements, scales)
    compiled_matches_eager(lambda b: torch.ops.lowbit.mxfp4_gguf_to_split(b), blocks)


# The two query ops return host values, which Dynamo cannot put in a graph; their callers fold
# them to constants at trace time (lowbit.compat.ggml_supports_iq_mmq does so itself).
@torch.compiler.assume_constant_result
def dense_kernel_id() -> int:
    return int(torch.ops.lowbit.select_dense_kernel(int(QuantType.IQ4_XS), 4, 64, 256, torch.device("cpu")))


def test_select_dense_kernel() -> None:
    compiled_matches_eager(lambda x: x + dense_kernel_id(), torch.ones(3))


@pytest.mark.parametrize("device", DEVICES)
def test_gguf_compat_ops(device: str, rng: np.random.Generator) -> None:
    q = int(QuantType.IQ2_S)
    w, _ = random_weight(QuantType.IQ2_S, 33, 512, rng, device=device)
    x = randn(rng, 3, 512, device=device).to(torch.float16)
    compiled_matches_eager(lambda w, x: torch.ops.lowbit.ggml_mul_mat_vec_a8(w, x, q, w.shape[0]), w, x)
    compiled_matches_eager(lambda w, x: torch.ops.lowbit.ggml_mul_mat_a8(w, x, q, w.shape[0]), w, x)
    compiled_matches_eager(lambda w: torch.ops.lowbit.ggml_dequantize(w, q, 33, 512, torch.bfloat16), w)
    compiled_matches_eager(lambda x: x * 2 if compat.ggml_supports_iq_mmq() else x, x)
    compiled_matches_eager(lambda w, x: compat.ggml_mul_mat_a8(w, x, q, w.shape[0]), w, x)


@pytest.mark.parametrize("device", DEVICES)
def test_mmq(device: str, rng: np.random.Generator) -> None:
    if device == "cuda" and not lowbit.capabilities()["types"]["iq3_s"]["usable"]["cuda_mmq"]:
        pytest.skip("MMQ needs a compute capability 9.0 GPU and a build for sm_90a")
    w, _ = random_weight(QuantType.IQ3_S, 40, 512, rng, device=device)
    x = randn(rng, 19, 512, device=device).to(torch.bfloat16)
    compiled_matches_eager(lambda x, w: torch.ops.lowbit.mmq(x, w, int(QuantType.IQ3_S)), x, w)


@pytest.mark.parametrize("device", DEVICES)
def test_moe_ops(device: str, rng: np.random.Generator) -> None:
    from lowbit import compat_moe, moe

    q, experts, top_k = QuantType.IQ4_NL, 4, 2
    w13, _ = random_weight(q, 64, 64, rng, experts=experts, device=device)
    w2, _ = random_weight(QuantType.Q8_0, 64, 32, rng, experts=experts, device=device)
    x = randn(rng, 5, 64, device=device)
    ids = torch.from_numpy(rng.integers(-1, experts + 1, (5, top_k))).to(device)
    weights = torch.from_numpy(rng.uniform(0.1, 1.0, (5, top_k)).astype(np.float32)).to(device)
    compiled_matches_eager(lambda t: moe.moe_align(t, experts, 64)[0], ids)
    compiled_matches_eager(lambda x, w, t: moe.moe_vec(x, w, q, t, top_k), x, w13, ids)
    compiled_matches_eager(
        lambda x, w, t: moe.moe_batched(x, w, q, moe.moe_align(t, experts, 64), top_k, pairs=t.numel()), x, w13, ids
    )
    compiled_matches_eager(
        lambda x, a, b, tw, t: moe.moe_layer(x, a, b, tw, t, w13_type=q, w2_type=QuantType.Q8_0, route="auto"),
        x,
        w13,
        w2,
        weights,
        ids,
    )
    block = compat_moe.ggml_moe_get_block_size(int(q))
    compiled_matches_eager(lambda x, w, t: compat_moe.ggml_moe_a8_vec(x, w, t, top_k, int(q), 64, 5), x, w13, ids)
    assert block > 0
