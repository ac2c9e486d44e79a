"""The fused MoE layer and its kernels on CUDA against references that round what the kernels
round: token counts from 1 to 4096 through the vector and batched kernels, balanced and skewed
routing, experts with no token, invalid and non-local ids, mixed and split MX types, CUDA-graph
replay equal to eager bit for bit, determinism, routing equal to the CPU's, expert weights beyond
2^31 bytes. Skipped cleanly without a GPU.

Bounds. The emulated reference rounds x to bf16, decodes the weights exactly (the batched kernel:
then to bf16 as it renders them: on Hopper the grouped MMQ's magnitude times bf16 scale rounded
once, _kernel_arithmetic.kernel_bf16_weights; elsewhere the float decode rounded), computes h in
float64, rounds act(gate) * up to bf16, and sums down projections and the top-k combine in
float64; for the vector kernel it also quantizes each projection's activations (x, then
act(gate) * up) to int8 per 32 values exactly as the int8 MMVQ does, for every type with an int8
form (_kernel_arithmetic.moe_vec_activations). What remains is float32 accumulation order (about
1e-6 relative) and act() in float32 flipping a bf16 rounding of an element now and then (2^-8 on a
small fraction of elements; through the vector kernel's int8 quantization of the down
projection's input, one code step of that element's group): ||out - ref|| / ||ref|| < 2e-3 for
float32 outputs. One projection has no such rounding: the vector kernel against its emulated
arithmetic within MOE_VEC_EXACT_BOUND (float32 sums, as the dense int8 MMVQ's 2e-5).
"""

from __future__ import annotations

from collections.abc import Callable

import lowbit
import numpy as np
import pytest
import torch
from _helpers import fresh_seed, random_weight, rel_err
from _kernel_arithmetic import kernel_bf16_weights, moe_vec_activations, record_error
from lowbit import QuantType
from lowbit.moe import moe_align, moe_batched, moe_batched_int8, moe_block_size, moe_layer, moe_vec

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

EMULATED_BOUND = 2e-3
MOE_VEC_EXACT_BOUND = 2e-5
KERNELS = ("moe_vec", "moe_batched")


def graph_equal_to_eager(run: Callable[[], torch.Tensor]) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
    """Runs `run` eagerly twice (the outputs must be equal: deterministic), warms it up on a side
    stream, captures it in a CUDA graph and replays that once; asserts the replay's output equals
    the eager one and returns the graph with its output tensor (for replays on new data)."""
    eager = run()
    assert torch.equal(run(), eager), "two eager runs differ"
    side = torch.cuda.Stream(device=dev())
    side.wait_stream(torch.cuda.current_stream(dev()))
    with torch.cuda.stream(side):
        run()  # warm up on the capturing stream
    torch.cuda.current_stream(dev()).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = run()
    graph.replay()
    torch.cuda.synchronize(dev())
    assert torch.equal(captured, eager)
    return graph, captured


def dev() -> torch.device:
    return torch.device("cuda", torch.cuda.device_count() - 1)


def bf16(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.bfloat16).to(t.dtype)


def grouped_mmq_runs(block_size: int) -> bool:
    """Whether moe_batched with this routing block size runs the grouped MMQ kernel here (a 9.0 GPU
    and a build for sm_90a; token tiles 16, 32, 48, 64, 128), else the mma.sync kernel."""
    return (
        torch.cuda.get_device_capability(dev()) == (9, 0)
        and lowbit.capabilities()["types"]["iq4_xs"]["kernels"]["cuda_mmq"]
        and block_size in (16, 32, 48, 64, 128)
    )


def batched_bf16_weights(w, qtype, scales, block_size) -> torch.Tensor:
    """float64 [E, N, K] on dev(): the bf16 weights the batched kernel multiplies."""
    if grouped_mmq_runs(block_size):
        per_expert = [
            kernel_bf16_weights(qtype, w[e].cpu(), None if scales is None else scales[e].cpu())
            for e in range(w.shape[0])
        ]
        return torch.stack(per_expert).to(dev())
    return bf16(lowbit.dequantize(w, qtype, scales=scales).double())


def act(name: str, v: torch.Tensor) -> torch.Tensor:
    if name == "silu":
        return torch.nn.functional.silu(v)
    return torch.nn.functional.gelu(v, approximate="tanh" if name == "gelu_tanh" else "none")


def emulated_reference(
    x, w13, w2, weights, ids, t13, t2, kernel, activation="silu", s13=None, s2=None, begin=0
) -> torch.Tensor:
    """float64 on the GPU, rounding where the kernels round (module docstring)."""
    # per projection: int8 codes times activations quantized per 32 values (the vector kernel, and
    # the batched one where moe_batched_int8 says so), or bf16 weights times bf16 activations
    int8_13 = int8_2 = kernel == "moe_vec"
    if kernel == "moe_batched":
        block = moe_block_size(ids.numel(), w13.shape[0], dev())
        int8_13, int8_2 = moe_batched_int8(t13, block, dev()), moe_batched_int8(t2, block, dev())
        W13 = (
            lowbit.dequantize(w13, t13, scales=s13).double() if int8_13 else batched_bf16_weights(w13, t13, s13, block)
        )
        W2 = lowbit.dequantize(w2, t2, scales=s2).double() if int8_2 else batched_bf16_weights(w2, t2, s2, block)
    else:
        W13 = lowbit.dequantize(w13, t13, scales=s13).double()
        W2 = lowbit.dequantize(w2, t2, scales=s2).double()
    E, two_i, _ = W13.shape
    inter = two_i // 2
    xb = moe_vec_activations(x, t13) if int8_13 else bf16(x.double())
    tokens, top_k = ids.shape
    out = torch.zeros(tokens, W2.shape[1], dtype=torch.float64, device=x.device)
    local = ids.long() - begin
    valid = (ids >= 0) & (local >= 0) & (local < E)
    for e in torch.unique(local[valid]).tolist():
        t_idx, k_idx = torch.nonzero(valid & (local == e), as_tuple=True)
        h = xb[t_idx] @ W13[e].T
        a = bf16(act(activation, h[:, :inter].float()).double() * h[:, inter:])
        y = (moe_vec_activations(a, t2) if int8_2 else a) @ W2[e].T
        out.index_add_(0, t_idx, y * weights[t_idx, k_idx].double()[:, None])
    return out


def routing(rng, tokens, experts, top_k, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    if kind == "balanced":
        ids = np.stack([rng.choice(experts, top_k, replace=False) for _ in range(tokens)])
    elif kind == "skewed":  # expert 3 takes (nearly) every token; a few experts get none
        ids = np.stack(
            [
                np.concatenate([[3], rng.choice(np.arange(5, 5 + top_k * 2), top_k - 1, replace=False)])
                for _ in range(tokens)
            ]
        )
    else:  # invalid and non-local ids mixed in
        ids = np.stack([rng.choice(experts, top_k, replace=False) for _ in range(tokens)])
        noise = rng.random(ids.shape)
        ids[noise < 0.1] = -1
        ids[(noise >= 0.1) & (noise < 0.2)] = experts + 7
    w = rng.random((tokens, top_k)).astype(np.float32)
    return torch.from_numpy(w / w.sum(1, keepdims=True)).to(dev()), torch.from_numpy(ids).to(dev())


@pytest.mark.parametrize("tokens", [1, 7, 127, 128, 129, 1000, 4096])
@pytest.mark.parametrize("kind", ["balanced", "skewed", "invalid"])
def test_fused_moe_every_token_count(tokens, kind, rng: np.random.Generator) -> None:
    hidden, inter, experts, top_k = 512, 256, 24, 4
    t13, t2 = QuantType.IQ4_XS, QuantType.IQ3_XXS
    w13, _ = random_weight(t13, 2 * inter, hidden, rng, experts=experts, device=dev())
    w2, _ = random_weight(t2, hidden, inter, rng, experts=experts, device=dev())
    x = torch.from_numpy(rng.standard_normal((tokens, hidden)).astype(np.float32)).to(dev())
    weights, ids = routing(rng, tokens, experts, top_k, kind)
    for kernel in KERNELS:
        out = moe_layer(x, w13, w2, weights, ids, w13_type=t13, w2_type=t2, route=kernel)
        ref = emulated_reference(x, w13, w2, weights, ids, t13, t2, kernel)
        assert rel_err(out, ref) < EMULATED_BOUND, kernel
    auto = lowbit.fused_moe(x, w13, w2, weights, ids, w13_type=t13, w2_type=t2)
    assert auto.shape == x.shape and auto.dtype == x.dtype
    # every token with no local expert is exactly zero
    none_local = ~((ids >= 0) & (ids < experts)).any(1)
    assert torch.equal(auto[none_local], torch.zeros_like(auto[none_local]))


def pair_reference(x, w, qtype, scales, ids, top_k, begin=0) -> torch.Tensor:
    """One projection over routed pairs as the vector kernel computes it (float64, its activations
    emulated); zero rows for pairs without a local expert."""
    W = lowbit.dequantize(w, qtype, scales=scales).double()
    xq = moe_vec_activations(x, qtype)
    local = ids.reshape(-1).long() - begin
    valid = (ids.reshape(-1) >= 0) & (local >= 0) & (local < W.shape[0])
    out = torch.zeros(local.numel(), W.shape[1], dtype=torch.float64, device=x.device)
    pairs = torch.nonzero(valid).flatten()
    for e in torch.unique(local[pairs]).tolist():
        p = pairs[local[pairs] == e]
        out[p] = xq[p // top_k] @ W[e].T
    return out


VEC_TYPES = [
    (QuantType.IQ4_XS, 2048, 768),  # the moe_proj benchmark's shape
    # IQ4_XS's staged rounds (rounds in whole 16-byte units): a short last round (816-byte rows),
    # and rows of 408 bytes, which take the unstaged kernel
    (QuantType.IQ4_XS, 256 * 6, 50),
    (QuantType.IQ4_XS, 256 * 3, 40),
    (QuantType.IQ4_XS, 1024, 36),  # one stage unit per row: the next unit is always the next item's
    # an activation row past a block's shared memory (234 KB of codes and scales against the
    # H200's 227 KB): the tensor-core pairs kernel and its prologue
    (QuantType.IQ4_XS, 212992, 24),
    # IQ2_XXS's staged rounds (two rounds to a 528-byte unit: rows of a multiple of eight blocks),
    # one unit per row and three
    (QuantType.IQ2_XXS, 2048, 26),
    (QuantType.IQ2_XXS, 256 * 24, 18),
    (QuantType.IQ2_XXS, 256 * 3, 70),  # three units, an N tail (70 = 4 tiles + 6)
    (QuantType.IQ2_XXS, 256 * 5, 12),  # paired rounds: an odd number of 256-blocks
    (QuantType.IQ4_NL, 32 * 80, 20),  # paired rounds over 32-blocks, a round short at the end
    # the split for few items (two-row items, paired rounds) at 1 and 7 tokens, the common one from
    # 127 (on 132 SMs: 4 pairs per token, N / 2 items each, against 132 x 32 teams): odd block counts
    (QuantType.IQ3_XXS, 256 * 5, 42),
    (QuantType.IQ3_S, 256 * 5, 26),
    (QuantType.IQ2_S, 256 * 3, 38),
    (QuantType.IQ1_S, 256 * 5, 34),
    # the same with an even number of blocks, read as aligned words (as at K = 2048); 48 sub-blocks:
    # lanes 0-15 take a paired step, the others one round
    (QuantType.IQ2_XXS, 256 * 6, 30),
    (QuantType.IQ3_XXS, 256 * 6, 36),  # the common split's sign-mask table (words only)
    (QuantType.IQ2_S, 256 * 6, 22),
    (QuantType.IQ3_S, 256 * 6, 34),
    (QuantType.IQ1_S, 256 * 6, 26),
    (QuantType.IQ2_XS, 512, 33),  # 16-weight scales
    (QuantType.IQ1_M, 256, 40),
    (QuantType.IQ3_S, 1280, 16),
    (QuantType.Q5_0, 32 * 13, 131),  # a short last unit of five 32-blocks
    (QuantType.Q8_0, 32 * 3, 17),
    (QuantType.MXFP4_SPLIT, 64, 66),  # split scales
    (QuantType.MXFP4, 32 * 9, 24),
    (QuantType.MXFP8_E4M3, 32 * 7, 40),  # no int8 form: the float32 kernel
]


@pytest.mark.parametrize(("qtype", "k", "n"), VEC_TYPES, ids=lambda v: getattr(v, "type_name", str(v)))
@pytest.mark.parametrize("tokens", [1, 7, 127, 128, 129])
def test_moe_vec_equals_its_arithmetic(qtype, k, n, tokens, rng: np.random.Generator) -> None:
    """The vector projection against the exact result of its own arithmetic, every kind of id
    (invalid, past E, other ranks'), x in float32, bf16 and fp16, the output poisoned first: rows
    of pairs without a local expert must be exact zeros, every other element written and within
    MOE_VEC_EXACT_BOUND. Scales of x vary per 32 values, and one group of one row is all zeros."""
    experts, top_k, begin = 9, 4, 3
    w, s = random_weight(qtype, n, k, rng, experts=experts, device=dev())
    scale = rng.uniform(0.05, 5.0, (tokens, k // 32, 1)).astype(np.float32)
    x = torch.from_numpy((rng.standard_normal((tokens, k // 32, 32)).astype(np.float32) * scale).reshape(tokens, k))
    x[0, :32] = 0.0
    ids = np.stack([rng.choice(experts, top_k, replace=False) for _ in range(tokens)]) + begin
    noise = rng.random(ids.shape)
    ids[noise < 0.1] = -1
    ids[(noise >= 0.1) & (noise < 0.15)] = begin + experts + 2
    ids[(noise >= 0.15) & (noise < 0.2)] = begin - 1
    ids_d = torch.from_numpy(ids).to(dev())
    valid = torch.from_numpy(((ids >= begin) & (ids < begin + experts)).reshape(-1))
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        xd = x.to(dev(), dtype)
        ref = pair_reference(xd, w, qtype, s, ids_d, top_k, begin)
        torch.cuda.empty_cache()  # the output (x's dtype) lands on the freed NaN block: all of it must be written
        bait = torch.full((tokens * top_k, n), float("nan"), device=dev(), dtype=dtype)
        poisoned = bait.data_ptr()
        del bait
        out = moe_vec(xd, w, qtype, ids_d, top_k, scales=s, expert_range=(begin, begin + experts))
        assert out.dtype == dtype
        assert out.data_ptr() == poisoned, "the poisoned block was not reused"
        out = out.float()
        assert out.shape == (tokens * top_k, n)
        assert bool(torch.isfinite(out).all())
        assert torch.equal(out.cpu()[~valid], torch.zeros_like(out.cpu()[~valid]))
        if dtype == torch.float32:
            err = rel_err(out, ref)
            record_error("moe_vec_exact", f"{qtype.type_name} T={tokens} K={k} N={n}", err)
            assert err < MOE_VEC_EXACT_BOUND, f"{qtype.type_name} T={tokens}: rel err {err:.3g}"
        else:  # the output rounded once to x's dtype
            assert rel_err(out, ref) < (6e-3 if dtype == torch.bfloat16 else 1e-3), dtype


def test_moe_vec_non_local_calls_keep_the_chain(rng: np.random.Generator) -> None:
    """Calls whose pairs all lack a local expert, each followed at once by a call with local pairs,
    on the tensor-core pairs kernel (an activation row past a block's shared memory) and on the lane
    kernel. The non-local call's blocks write zeros and exit; they must still wait for its activation
    prologue, or the next call's prologue would race it on the reused workspace."""
    experts, top_k, tokens, n = 4, 2, 24, 24
    for qtype, k in ((QuantType.IQ4_XS, 212992), (QuantType.IQ4_NL, 32 * 80)):
        w, s = random_weight(qtype, n, k, rng, experts=experts, device=dev())
        rounds = 3
        xs = [torch.from_numpy(rng.standard_normal((tokens, k)).astype(np.float32)).to(dev()) for _ in range(rounds)]
        local = [
            torch.from_numpy(np.stack([rng.choice(experts, top_k, replace=False) for _ in range(tokens)])).to(dev())
            for _ in range(rounds)
        ]
        foreign = torch.full((tokens, top_k), experts + 1, dtype=torch.int64, device=dev())
        refs = [pair_reference(x, w, qtype, s, i, top_k) for x, i in zip(xs, local, strict=True)]
        outs, zeros = [], []
        for x, i in zip(xs, local, strict=True):  # no host read between the calls
            zeros.append(moe_vec(x.flip(1).contiguous(), w, qtype, foreign, top_k, scales=s))
            outs.append(moe_vec(x, w, qtype, i, top_k, scales=s))
        for r, (y, z, ref) in enumerate(zip(outs, zeros, refs, strict=True)):
            assert torch.equal(z.cpu(), torch.zeros_like(z.cpu())), f"{qtype.type_name} call {r}: non-local rows"
            err = rel_err(y.float(), ref)
            assert err < MOE_VEC_EXACT_BOUND, f"{qtype.type_name} call {r}: rel err {err:.3g}"


def test_moe_vec_grid_beyond_65535_pairs(rng: np.random.Generator) -> None:
    """8193 tokens x top-8 = 65544 pairs: one block per pair, flattened in x past 65535."""
    tokens, top_k, experts, n, k = 8193, 8, 5, 16, 64
    w, _ = random_weight(QuantType.Q8_0, n, k, rng, experts=experts, device=dev())
    x = torch.from_numpy(rng.standard_normal((tokens, k)).astype(np.float32)).to(dev())
    ids = torch.from_numpy(rng.integers(-1, experts, (tokens, top_k))).to(dev())
    out = moe_vec(x, w, QuantType.Q8_0, ids, top_k)
    ref = pair_reference(x, w, QuantType.Q8_0, None, ids, top_k)
    assert rel_err(out, ref) < MOE_VEC_EXACT_BOUND
    beyond = slice(65536, None)  # the blocks past 65535 alone
    assert bool(ref[beyond].abs().sum() > 0) and rel_err(out[beyond], ref[beyond]) < MOE_VEC_EXACT_BOUND


MIXED = [
    (QuantType.IQ3_XXS, QuantType.IQ2_XS, 512, 256),
    (QuantType.IQ3_S, QuantType.Q5_0, 768, 160),  # down: K = 160 (a half-full last K tile)
    (QuantType.Q5_0, QuantType.IQ3_S, 416, 256),  # gate/up: K = 416, down: N = 416 (tails)
    (QuantType.MXFP8_E4M3, QuantType.MXFP4_SPLIT, 288, 96),
    (QuantType.MXFP4_SPLIT, QuantType.MXFP8_E4M3, 96, 288),
    (QuantType.IQ1_M, QuantType.IQ2_S, 256, 256),
    (QuantType.MXFP4, QuantType.Q8_0, 320, 64),
    # gate/up of IQ2_XXS rows of eight blocks: the gated pairs mode's staged units (at 200 tokens)
    (QuantType.IQ2_XXS, QuantType.IQ4_XS, 2048, 256),
    # gate/up of IQ4_XS rows of whole 16-byte units: the gated pairs mode's staged kernel (two boxes
    # per unit: the gate rows', the up rows')
    (QuantType.IQ4_XS, QuantType.Q8_0, 2048, 160),
]


@pytest.mark.parametrize(("t13", "t2", "hidden", "inter"), MIXED, ids=lambda v: getattr(v, "type_name", str(v)))
@pytest.mark.parametrize("tokens", [3, 200])
@pytest.mark.parametrize("activation", ["silu", "gelu", "gelu_tanh"])
def test_fused_moe_mixed_and_split_types(t13, t2, hidden, inter, tokens, activation, rng) -> None:
    experts, top_k, begin = 10, 3, 5
    w13, s13 = random_weight(t13, 2 * inter, hidden, rng, experts=experts, device=dev())
    w2, s2 = random_weight(t2, hidden, inter, rng, experts=experts, device=dev())
    x = torch.from_numpy(rng.standard_normal((tokens, hidden)).astype(np.float32)).to(dev())
    weights, ids = routing(rng, tokens, experts, top_k, "invalid")
    ids = ids + begin
    kw = {"w13_type": t13, "w2_type": t2, "activation": activation, "w13_scales": s13, "w2_scales": s2}
    for kernel in KERNELS:
        out = moe_layer(x, w13, w2, weights, ids, expert_range=(begin, begin + experts), route=kernel, **kw)
        ref = emulated_reference(x, w13, w2, weights, ids, t13, t2, kernel, activation, s13, s2, begin)
        assert rel_err(out, ref) < EMULATED_BOUND, kernel


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_fused_moe_half_inputs_against_the_cpu_reference(dtype, rng: np.random.Generator) -> None:
    """bf16 / fp16 in and out against the CPU reference MoE (float64 over the same inputs): the
    output rounding (2^-9 per element) dominates, and for the vector kernel the int8 activations
    (held to the dense int8 MMVQ's end-to-end bound, test_cuda_kernels.py: MMVQ_INT8_BOUND)."""
    tokens, hidden, inter, experts, top_k = 150, 512, 256, 12, 4
    w13, _ = random_weight(QuantType.IQ2_XXS, 2 * inter, hidden, rng, experts=experts, device=dev())
    w2, _ = random_weight(QuantType.IQ4_XS, hidden, inter, rng, experts=experts, device=dev())
    x = torch.from_numpy(rng.standard_normal((tokens, hidden)).astype(np.float32)).to(dev(), dtype)
    weights, ids = routing(rng, tokens, experts, top_k, "balanced")
    kw = {"w13_type": QuantType.IQ2_XXS, "w2_type": QuantType.IQ4_XS}
    ref = lowbit.fused_moe(x.cpu().float(), w13.cpu(), w2.cpu(), weights.cpu(), ids.cpu(), **kw)
    for kernel in KERNELS:
        out = moe_layer(x, w13, w2, weights.to(dtype), ids.int(), route=kernel, **kw)
        assert out.dtype == dtype
        assert rel_err(out, ref) < (3e-2 if kernel == "moe_vec" else 1e-2), kernel


@pytest.mark.parametrize("kernel", KERNELS)
def test_graph_replay_equals_eager_and_runs_are_deterministic(kernel, rng: np.random.Generator) -> None:
    tokens, hidden, inter, experts, top_k = 300, 512, 256, 16, 8
    t13, t2 = QuantType.IQ3_XXS, QuantType.IQ2_XS
    w13, _ = random_weight(t13, 2 * inter, hidden, rng, experts=experts, device=dev())
    w2, _ = random_weight(t2, hidden, inter, rng, experts=experts, device=dev())
    x = torch.from_numpy(rng.standard_normal((tokens, hidden)).astype(np.float32)).to(dev(), torch.bfloat16)
    weights, ids = routing(rng, tokens, experts, top_k, "invalid")

    def run() -> torch.Tensor:
        return moe_layer(x, w13, w2, weights, ids, w13_type=t13, w2_type=t2, route=kernel)

    graph, captured = graph_equal_to_eager(run)
    # new routing and activations through the same graph: the routing is data, not shape
    new_weights, new_ids = routing(rng, tokens, experts, top_k, "skewed")
    x.copy_(torch.randn_like(x))
    weights.copy_(new_weights)
    ids.copy_(new_ids)
    graph.replay()
    torch.cuda.synchronize(dev())
    assert torch.equal(captured, run())


# (tokens, experts, top_k, block): the four-kernel form (past 4096 pairs) and the one-block form,
# each with 512 experts, and the two sides of their boundary (4096 and 4097 pairs)
ROUTINGS = [
    (4096, 256, 8, 64),
    (1000, 512, 16, 64),
    (77, 3, 2, 16),
    (256, 512, 16, 64),
    (512, 128, 8, 16),
    (4097, 40, 1, 32),
    (1, 7, 1, 1),
    (0, 512, 8, 64),  # no pairs: the padding and the tail alone
    (300, 512, 4, 1024),  # the largest block size
]


def test_gpu_routing_equals_cpu_routing(rng: np.random.Generator) -> None:
    for tokens, experts, top_k, block in ROUTINGS:
        ids = torch.from_numpy(rng.integers(-2, experts + 2, (tokens, top_k)))
        ids[: tokens // 2, 0] = 1  # skew: one expert takes half the tokens
        cpu = moe_align(ids, experts, block)
        for ids_d in (ids.to(dev()).int(), ids.to(dev())):  # int32 and int64 ids
            gpu = moe_align(ids_d, experts, block)
            for a, b in zip(cpu, gpu, strict=True):
                if isinstance(a, torch.Tensor):
                    assert torch.equal(a, b.cpu()), (tokens, experts, top_k, block, ids_d.dtype)
                else:  # the block size the routing was made with
                    assert a == b == block


def test_expert_weights_beyond_2_to_the_31_bytes() -> None:
    """Q8_0 experts of 2.3 GB in total; pairs routed to the last experts read past 2^31 bytes."""
    experts, n, k = 64, 2048, 16384
    row_bytes = k // 32 * 34
    assert experts * n * row_bytes > 2**31
    w = torch.randint(-128, 128, (experts, n, k // 32, 34), dtype=torch.int8, device=dev()).view(torch.uint8)
    w[..., 0:2] = torch.tensor([0x00, 0x20], dtype=torch.uint8, device=dev())  # d = fp16 0x2000, 2^-7
    w = w.reshape(experts, n, row_bytes)
    x = torch.randn(3, k, device=dev())
    ids = torch.tensor([[63, 62], [1, 63], [-1, 62]], device=dev())
    xq = moe_vec_activations(x, QuantType.Q8_0)
    ref = torch.zeros(6, n, dtype=torch.float64, device=dev())
    for p, e in enumerate(ids.flatten().tolist()):
        if e >= 0:
            ref[p] = lowbit.dequantize(w[e], QuantType.Q8_0).double() @ xq[p // 2]
    out = moe_vec(x, w, QuantType.Q8_0, ids, 2)
    assert rel_err(out, ref) < 1e-4  # float32 sums of 16384 terms
    routing_ = moe_align(ids, experts)
    out_b = lowbit.moe.moe_batched(x, w, QuantType.Q8_0, routing_, 2, 6)
    ref_b = torch.zeros_like(ref)
    for p, e in enumerate(ids.flatten().tolist()):
        if e >= 0:
            ref_b[p] = bf16(lowbit.dequantize(w[e], QuantType.Q8_0).double()) @ bf16(x[p // 2].double())
    assert rel_err(out_b, ref_b) < 1e-4


# The batched projection against the exact result of its own roundings (the dense MMQ's bound where
# the grouped MMQ runs; float32 sums of the mma.sync kernel elsewhere)
GROUPED_EXACT_BOUND = 3e-5
MMA_SYNC_EXACT_BOUND = 1e-4
# math="int8": against the int8 codes and scales multiplied exactly (float32 scaling and sums)
INT8_EXACT_BOUND = 2e-5


def _exact_projection(x, W, ids, top_k, x_rounded: torch.Tensor | None = None) -> torch.Tensor:
    """float64 [pairs, N]: pair p is W[ids[p]] @ bf16(x[p // top_k]) (or x_rounded[p // top_k], the
    rows as another arithmetic rounds them); zero where ids[p] is not local."""
    flat = ids.flatten().long()
    out = torch.zeros(flat.numel(), W.shape[1], dtype=torch.float64, device=x.device)
    xb = bf16(x.double()) if x_rounded is None else x_rounded
    for e in torch.unique(flat[(flat >= 0) & (flat < W.shape[0])]).tolist():
        p = torch.nonzero(flat == e).flatten()
        out[p] = xb[p // top_k] @ W[e].T
    return out


@pytest.mark.parametrize("block_size", [16, 32, 48, 64, 128, 40])
@pytest.mark.parametrize("tokens", [1, 7, 127, 128, 129, 1000])
@pytest.mark.parametrize("kind", ["balanced", "skewed", "invalid"])
def test_batched_projection_against_its_roundings(block_size, tokens, kind) -> None:
    """Every token tile of the grouped MMQ (and 40: the mma.sync kernel), N and K tails (N = 200: a
    partial row tile; K = 800: a partial 256-weight unit), experts with no pair, dropped pairs."""
    rng = np.random.default_rng(fresh_seed())
    experts, top_k, n = 16, 4, 200
    q = QuantType.IQ4_NL  # 32-weight blocks: K = 800 ends inside a 256-weight unit
    k = 800
    w, s = random_weight(q, n, k, rng, experts=experts, device=dev())
    x = torch.from_numpy(rng.standard_normal((tokens, k)).astype(np.float32)).to(dev())
    _, ids = routing(rng, tokens, experts, top_k, kind)
    r = moe_align(ids, experts, block_size)
    assert r.block_size == block_size
    y = moe_batched(x, w, q, r, top_k, tokens * top_k, scales=s, math="bf16")
    assert y.shape == (tokens * top_k, n) and y.dtype == torch.float32
    exact = _exact_projection(x, batched_bf16_weights(w, q, s, block_size), ids, top_k)
    err = rel_err(y, exact)
    grouped = grouped_mmq_runs(block_size)
    what = f"moe_batched {'grouped' if grouped else 'mma.sync'} T={tokens} block={block_size} {kind}"
    record_error("moe_batched_exact", what, err)
    assert err < (GROUPED_EXACT_BOUND if grouped else MMA_SYNC_EXACT_BOUND), f"{what}: rel err {err:.3g}"
    dropped = ~((ids.flatten() >= 0) & (ids.flatten() < experts))
    assert torch.equal(y[dropped], torch.zeros_like(y[dropped]))


@pytest.mark.parametrize(
    "qtype,k",
    [(QuantType.IQ4_XS, 1024), (QuantType.IQ4_NL, 1024), (QuantType.IQ4_NL, 1056)],
    ids=["iq4_xs-1024", "iq4_nl-1024", "iq4_nl-1056"],
)
@pytest.mark.parametrize("gated", [False, True], ids=["plain", "gated"])
def test_batched_wide_tile_with_exact_and_loose_row_spans(qtype, k, gated) -> None:
    """The 48-token tile of the nibble formats stages its rows in 144-byte spans where every unit
    starts at most 8 bytes past a 16-byte boundary (IQ4_XS always; IQ4_NL with K a multiple of 256)
    and in 176-byte spans else (IQ4_NL rows of 594 bytes at K = 1056); N = 320 is one whole
    tile of 256 rows and a partial one (gated, in the layer: 160 outputs over tiles of 128)."""
    rng = np.random.default_rng(fresh_seed())
    experts, tokens, top_k, n = 8, 60, 4, 320
    block = 48
    assert moe_block_size(tokens * top_k, experts, dev()) == block  # 30 pairs per expert: the layer's tile too
    w, s = random_weight(qtype, n, k, rng, experts=experts, device=dev())
    x = torch.from_numpy(rng.standard_normal((tokens, k)).astype(np.float32)).to(dev())
    weights, ids = routing(rng, tokens, experts, top_k, "balanced" if gated else "invalid")
    if not gated:
        y = moe_batched(x, w, qtype, moe_align(ids, experts, block), top_k, tokens * top_k, scales=s, math="bf16")
        exact = _exact_projection(x, batched_bf16_weights(w, qtype, s, block), ids, top_k)
        err = rel_err(y, exact)
        assert err < (GROUPED_EXACT_BOUND if grouped_mmq_runs(block) else MMA_SYNC_EXACT_BOUND), f"rel err {err:.3g}"
        return
    w2, _ = random_weight(QuantType.Q8_0, k, n // 2, rng, experts=experts, device=dev())
    out = moe_layer(x, w, w2, weights, ids, w13_type=qtype, w2_type=QuantType.Q8_0, route="moe_batched")
    ref = emulated_reference(x, w, w2, weights, ids, qtype, QuantType.Q8_0, "moe_batched")
    assert rel_err(out, ref) < EMULATED_BOUND


@pytest.mark.parametrize("block_size", [16, 32, 64])
@pytest.mark.parametrize("tokens", [7, 129, 1000])
@pytest.mark.parametrize("kind", ["balanced", "skewed", "invalid"])
@pytest.mark.parametrize("qtype", [QuantType.IQ4_NL, QuantType.IQ3_S, QuantType.MXFP4_SPLIT], ids=lambda q: q.type_name)
def test_batched_int8_projection_against_its_arithmetic(block_size, tokens, kind, qtype) -> None:
    """math="int8" on the grouped MMQ: the weights' int8 codes times x rounded to bf16 and quantized
    per 32 values (moe_vec_activations emulates it), float32 scaling and sums; K = 800 / 1280 end
    inside a 256-weight unit; dropped pairs stay zero."""
    if not grouped_mmq_runs(block_size):
        pytest.skip("the int8 path is the grouped MMQ kernel's (a 9.0 GPU and a build for sm_90a)")
    rng = np.random.default_rng(fresh_seed())
    experts, top_k, n = 16, 4, 200
    k = 800 if qtype != QuantType.IQ3_S else 1280
    w, s = random_weight(qtype, n, k, rng, experts=experts, device=dev())
    x = torch.from_numpy(rng.standard_normal((tokens, k)).astype(np.float32)).to(dev())
    _, ids = routing(rng, tokens, experts, top_k, kind)
    y = moe_batched(x, w, qtype, moe_align(ids, experts, block_size), top_k, tokens * top_k, scales=s, math="int8")
    assert y.shape == (tokens * top_k, n) and y.dtype == torch.float32
    wf = torch.stack([lowbit.dequantize(w[e], qtype, scales=None if s is None else s[e]) for e in range(experts)])
    exact = _exact_projection(x, wf.double().to(dev()), ids, top_k, moe_vec_activations(x, qtype))
    err = rel_err(y, exact)
    what = f"moe_batched int8 {qtype.type_name} T={tokens} block={block_size} {kind}"
    record_error("moe_batched_int8_exact", what, err)
    assert err < INT8_EXACT_BOUND, f"{what}: rel err {err:.3g}"
    dropped = ~((ids.flatten() >= 0) & (ids.flatten() < experts))
    assert torch.equal(y[dropped], torch.zeros_like(y[dropped]))


@pytest.mark.parametrize("qtype", [QuantType.IQ4_XS, QuantType.IQ2_XXS], ids=lambda q: q.type_name)
@pytest.mark.parametrize("block_size", [16, 32, 64])
def test_batched_auto_arithmetic_is_the_measured_one(qtype, block_size) -> None:
    """math="auto" runs what moe_batched_int8 names (int8 for the nibble formats up to 32-row
    blocks on Hopper, for the grid formats at 16, bf16 elsewhere), bit for bit."""
    rng = np.random.default_rng(fresh_seed())
    experts, tokens, top_k, n, k = 8, 64, 2, 136, 1024
    w, _ = random_weight(qtype, n, k, rng, experts=experts, device=dev())
    x = torch.randn(tokens, k, device=dev())
    _, ids = routing(rng, tokens, experts, top_k, "balanced")
    r = moe_align(ids, experts, block_size)
    auto = moe_batched(x, w, qtype, r, top_k, tokens * top_k)
    int8 = moe_batched_int8(qtype, block_size, dev())
    expected = grouped_mmq_runs(block_size) and block_size <= (32 if qtype == QuantType.IQ4_XS else 16)
    assert int8 == expected
    if grouped_mmq_runs(block_size):
        named = moe_batched(x, w, qtype, r, top_k, tokens * top_k, math="int8" if int8 else "bf16")
        assert torch.equal(auto, named)


def test_batched_int8_names_its_rules() -> None:
    rng = np.random.default_rng(fresh_seed())
    x = torch.randn(8, 512, device=dev())
    ids = torch.randint(0, 4, (8, 2), device=dev(), dtype=torch.int32)
    w, _ = random_weight(QuantType.IQ2_XS, 64, 512, rng, experts=4, device=dev())
    with pytest.raises(ValueError, match='math: "int8" moe_batched needs a type whose int8 form'):
        moe_batched(x, w, QuantType.IQ2_XS, moe_align(ids, 4, 16), 2, 16, math="int8")
    w, _ = random_weight(QuantType.IQ4_NL, 64, 512, rng, experts=4, device=dev())
    for block in (128, 48):  # 48: a bf16 tile only
        with pytest.raises((ValueError, RuntimeError), match=r"math \(proj.math\): int8 runs on the grouped MMQ"):
            moe_batched(x, w, QuantType.IQ4_NL, moe_align(ids, 4, block), 2, 16, math="int8")


@pytest.mark.parametrize(
    "qtype",
    [QuantType.IQ4_XS, QuantType.IQ2_XXS, QuantType.IQ1_M, QuantType.Q8_0, QuantType.MXFP4_SPLIT, QuantType.MXFP8_E4M3],
    ids=lambda q: q.type_name,
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("kernel", ["dispatcher", "mma_sync"])
def test_batched_projection_types_and_activation_dtypes(qtype, dtype, kernel) -> None:
    """Weight types of each family (split MX scales offset per expert too) at the block size the
    dispatcher picks and at 48 (the mma.sync kernel everywhere), x in every dtype (rounded to bf16
    once), x rows one per pair (top_k = 1)."""
    rng = np.random.default_rng(fresh_seed())
    experts, tokens, n = 12, 300, 136
    elems = 256 if qtype in (QuantType.IQ4_XS, QuantType.IQ2_XXS, QuantType.IQ1_M) else 32
    k = 1024 + elems
    w, s = random_weight(qtype, n, k, rng, experts=experts, device=dev())
    x = torch.from_numpy(rng.standard_normal((tokens, k)).astype(np.float32)).to(dev(), dtype)
    _, ids = routing(rng, tokens, experts, 1, "invalid")
    block = moe_block_size(tokens, experts, dev()) if kernel == "dispatcher" else 48
    y = moe_batched(x, w, qtype, moe_align(ids, experts, block), 1, tokens, scales=s, math="bf16")
    assert y.dtype == dtype
    exact = _exact_projection(x.float(), batched_bf16_weights(w, qtype, s, block), ids, 1)
    bound = 2.0**-8 if dtype != torch.float32 else (GROUPED_EXACT_BOUND if grouped_mmq_runs(block) else 1e-4)
    assert rel_err(y, exact) < bound, qtype.type_name
    if dtype != torch.float32:  # written by the kernel: the float32 result of the same bf16 rows, rounded once
        y32 = moe_batched(x.float(), w, qtype, moe_align(ids, experts, block), 1, tokens, scales=s, math="bf16")
        assert torch.equal(y, y32.to(dtype)), qtype.type_name


def test_batched_projection_graph_replay_and_determinism() -> None:
    rng = np.random.default_rng(fresh_seed())
    experts, tokens, top_k, n, k = 32, 512, 8, 384, 2048
    q = QuantType.IQ4_XS
    w, _ = random_weight(q, n, k, rng, experts=experts, device=dev())
    x = torch.from_numpy(rng.standard_normal((tokens, k)).astype(np.float32)).to(dev(), torch.bfloat16)
    _, ids = routing(rng, tokens, experts, top_k, "balanced")
    block = moe_block_size(tokens * top_k, experts, dev())

    def run() -> torch.Tensor:
        return moe_batched(x, w, q, moe_align(ids, experts, block), top_k, tokens * top_k)

    graph, captured = graph_equal_to_eager(run)
    _, new_ids = routing(rng, tokens, experts, top_k, "skewed")
    ids.copy_(new_ids)
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize(dev())
    assert torch.equal(captured, run())


def test_block_size_follows_pairs_per_expert() -> None:
    if not grouped_mmq_runs(16):
        assert moe_block_size(4096, 128, dev()) == 64
        return
    assert moe_block_size(128 * 8, 128, dev()) == 16  # 8 pairs per expert (1.5x: 12)
    assert moe_block_size(256 * 8, 128, dev()) == 32
    assert moe_block_size(512 * 8, 128, dev()) == 48  # 32 per expert (1.5x: 48)
    assert moe_block_size(513 * 8, 128, dev()) == 64
    assert moe_block_size(4096 * 8, 128, dev()) == 128
