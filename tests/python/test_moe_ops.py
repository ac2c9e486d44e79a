"""The low-level MoE ops (moe_align, moe_vec, moe_batched, moe_layer) and the GGUF-compatible ones
(ggml_moe_a8, ggml_moe_a8_vec, ggml_moe_get_block_size) on every available device: against an
independent Python routing and a float64 reference, opcheck, and their argument errors."""

from __future__ import annotations

import lowbit
import numpy as np
import pytest
import torch
from _helpers import random_weight, rel_err
from _kernel_arithmetic import moe_vec_activations
from lowbit import QuantType
from lowbit.compat_moe import ggml_moe_a8, ggml_moe_a8_vec, ggml_moe_get_block_size
from lowbit.moe import moe_align, moe_batched, moe_batched_int8, moe_block_size, moe_layer, moe_vec

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
# CPU: float32 GEMM on the exactly decoded weights. CUDA: activations rounded to bf16 (and the
# batched kernel's weights too): 2^-9 per element, far less over a norm of K-term sums.
BOUND = {"cpu": 1e-5, "cuda": 1e-2}
# CUDA's vector path quantizes the activations to int8 per 32 values (every type with an int8 form):
# against its own emulated arithmetic only float32 summation differs (test_moe_cuda.py's
# MOE_VEC_EXACT_BOUND); against unquantized activations, whole layers through it are held to the
# dense int8 MMVQ's end-to-end bound (test_cuda_kernels.py: MMVQ_INT8_BOUND).
VEC_EXACT_BOUND = 2e-5
VEC_LAYER_BOUND = {"cpu": 1e-5, "cuda": 3e-2}


def python_align(ids: np.ndarray, experts: int, begin: int, block: int) -> tuple[list[int], list[int], int, list[int]]:
    """The moe_align_block_size convention, written plainly."""
    flat = ids.reshape(-1).tolist()
    pairs = len(flat)
    local = [i - begin if i >= 0 and 0 <= i - begin < experts else -1 for i in flat]
    capacity = pairs + experts * (block - 1)
    sorted_ids, block_experts, slots = [], [], [-1] * pairs
    for e in range(experts):
        mine = [p for p in range(pairs) if local[p] == e]
        for p in mine:
            slots[p] = len(sorted_ids)
            sorted_ids.append(p)
        pad = -len(mine) % block
        sorted_ids += [pairs] * pad
        block_experts += [e] * ((len(mine) + pad) // block)
    used = len(sorted_ids)
    sorted_ids += [pairs] * (capacity - used)
    block_experts += [-1] * (-(-capacity // block) - len(block_experts))
    return sorted_ids, block_experts, used, slots


def random_ids(rng: np.random.Generator, tokens: int, top_k: int, experts: int, begin: int = 0) -> np.ndarray:
    """Routing with invalid (-1, far past E) and non-local ids mixed in."""
    ids = np.stack([rng.choice(experts, top_k, replace=False) for _ in range(tokens)]) + begin
    noise = rng.random(ids.shape)
    ids[noise < 0.1] = -1
    ids[(noise >= 0.1) & (noise < 0.15)] = begin + experts + 3
    ids[(noise >= 0.15) & (noise < 0.2)] = max(begin - 1, -5)
    return ids


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("ids_dtype", [torch.int32, torch.int64], ids=str)
def test_moe_align_matches_python(device, ids_dtype, rng: np.random.Generator) -> None:
    for tokens, top_k, experts, begin, block in [
        (1, 1, 1, 0, 1),
        (7, 2, 5, 3, 4),
        (300, 8, 40, 0, 64),
        (33, 3, 9, 2, 7),
    ]:
        ids = random_ids(rng, tokens, top_k, experts, begin)
        routing = moe_align(
            torch.from_numpy(ids).to(device, ids_dtype), experts, block, expert_range=(begin, begin + experts)
        )
        want_sorted, want_blocks, want_used, want_slots = python_align(ids, experts, begin, block)
        assert routing.sorted_pair_ids.cpu().tolist() == want_sorted
        assert routing.block_experts.cpu().tolist() == want_blocks
        assert routing.num_padded.cpu().tolist() == [want_used]
        assert routing.pair_slots.cpu().tolist() == want_slots


def reference_projection(x, w, qtype, scales, ids, top_k, begin=0, vector_arithmetic=False) -> torch.Tensor:
    """float64 on the decoded weights; vector_arithmetic: on the activations as CUDA's vector path
    quantizes them (moe_vec_activations)."""
    W = lowbit.dequantize(w.cpu(), qtype, scales=None if scales is None else scales.cpu()).double()
    flat = ids.reshape(-1).cpu().tolist()
    out = torch.zeros(len(flat), W.shape[1], dtype=torch.float64)
    xs = (moe_vec_activations(x, qtype) if vector_arithmetic else x).cpu().double()
    for p, i in enumerate(flat):
        e = i - begin
        if i >= 0 and 0 <= e < W.shape[0]:
            out[p] = W[e] @ xs[p // top_k]
    return out


PROJ_CASES = [
    (QuantType.IQ3_XXS, 256 * 3, 70),  # K of three 256-blocks (a half-full last K tile), N tail
    (QuantType.IQ2_XS, 512, 64),
    (QuantType.Q5_0, 32 * 13, 131),
    (QuantType.IQ4_NL, 32 * 5, 96),
    (QuantType.MXFP8_E4M3, 32 * 7, 40),
    (QuantType.MXFP4_SPLIT, 64, 66),
    (QuantType.IQ4_XS, 256 * 2, 256),  # whole 128-row tiles of the grouped kernel, no N tail
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("qtype", "k", "n"), PROJ_CASES, ids=lambda v: getattr(v, "type_name", str(v)))
def test_moe_vec_and_batched_match_reference(device, qtype, k, n, rng: np.random.Generator) -> None:
    experts, top_k, tokens, begin = 6, 2, 37, 2
    w, s = random_weight(qtype, n, k, rng, experts=experts, device=device)
    x = torch.from_numpy(rng.standard_normal((tokens, k)).astype(np.float32)).to(device)
    ids = torch.from_numpy(random_ids(rng, tokens, top_k, experts, begin)).to(device)
    ref = reference_projection(x, w, qtype, s, ids, top_k, begin)
    vec = moe_vec(x, w, qtype, ids, top_k, scales=s, expert_range=(begin, begin + experts))
    assert vec.shape == (tokens * top_k, n) and vec.dtype == x.dtype
    if device == "cuda":
        vec_ref = reference_projection(x, w, qtype, s, ids, top_k, begin, vector_arithmetic=True)
        assert rel_err(vec, vec_ref) < VEC_EXACT_BOUND
    else:
        assert rel_err(vec, ref) < BOUND[device]
    for block in (64, 16, 128, 5):  # the batched kernel takes the block size the routing was made with
        routing = moe_align(ids, experts, block, expert_range=(begin, begin + experts))
        # the output's memory held NaNs just before (the caching allocator hands the freed block back):
        # with the routing's pair slots the dropped rows are written as zeros, not found so
        poison = torch.full((tokens * top_k, n), float("nan"), device=device, dtype=x.dtype)
        poisoned = poison.data_ptr()
        del poison
        batched = moe_batched(x, w, qtype, routing, top_k, tokens * top_k, scales=s)
        if device == "cuda":
            assert batched.data_ptr() == poisoned, "the output did not reuse the NaN block: the zeros check is blind"
        # the grouped MMQ's int8 path (where measured faster) has the int8 MMVQ's bound
        int8 = device == "cuda" and moe_batched_int8(qtype, block, device)
        assert rel_err(batched, ref) < (VEC_LAYER_BOUND[device] if int8 else BOUND[device]), f"block {block}"
        dropped = (routing.pair_slots < 0).cpu()
        assert bool(dropped.any()), "the routing should drop some pairs"
        assert torch.equal(batched.cpu()[dropped], torch.zeros_like(batched.cpu()[dropped]))
        # without the slots (the GGUF-compatible callers' routing) the op zeroes the whole output first
        plain = torch.ops.lowbit.moe_batched(
            x,
            w,
            int(qtype),
            routing.sorted_pair_ids,
            routing.block_experts,
            routing.num_padded,
            top_k,
            tokens * top_k,
            scales=s,
            block_size=block,
        )
        assert torch.equal(plain, batched), f"block {block}"
        if device == "cuda":  # 2-byte outputs: the zeros (written by the same prologue) and the values
            for dtype in (torch.bfloat16, torch.float16):
                xh = x.to(dtype)
                poison = torch.full((tokens * top_k, n), float("nan"), device=device, dtype=dtype)
                poisoned = poison.data_ptr()
                del poison
                half = moe_batched(xh, w, qtype, routing, top_k, tokens * top_k, scales=s)
                assert half.data_ptr() == poisoned, "the output did not reuse the NaN block: the zeros check is blind"
                assert torch.equal(half.cpu()[dropped], torch.zeros_like(half.cpu()[dropped]))
                assert not bool(half.isnan().any()), f"block {block} {dtype}"
                # x rounded to the dtype (the bf16 path rounds it to bf16 anyway), the output rounded once
                bound = (VEC_LAYER_BOUND if int8 else BOUND)[device] + 8e-3
                assert rel_err(half.float(), ref) < bound, f"block {block} {dtype}"
    assert torch.equal(vec.cpu()[dropped], torch.zeros_like(vec.cpu()[dropped]))


@pytest.mark.parametrize("device", DEVICES)
def test_batched_pairs_not_a_multiple_of_top_k(device, rng: np.random.Generator) -> None:
    # 2 * 19 - 1 pairs over 19 activation rows: the last row holds one pair, dropped, so the
    # prologue's zeros of the dropped pairs run over a short last row
    qtype, k, n, experts, top_k, tokens = QuantType.IQ4_NL, 32 * 5, 96, 6, 2, 19
    w, s = random_weight(qtype, n, k, rng, experts=experts, device=device)
    x = torch.from_numpy(rng.standard_normal((tokens, k)).astype(np.float32)).to(device)
    flat = random_ids(rng, tokens, top_k, experts).reshape(-1)[:-1]
    flat[-1] = -1
    ids = torch.from_numpy(flat).to(device)
    pairs = ids.numel()
    ref = reference_projection(x, w, qtype, s, ids, top_k)
    for block in (16, 64, 5):
        routing = moe_align(ids, experts, block)
        assert routing.pair_slots.numel() == pairs
        y = moe_batched(x, w, qtype, routing, top_k, pairs, scales=s)
        assert y.shape == (pairs, n)
        int8 = device == "cuda" and moe_batched_int8(qtype, block, device)
        assert rel_err(y, ref) < (VEC_LAYER_BOUND[device] if int8 else BOUND[device]), f"block {block}"
        dropped = (routing.pair_slots < 0).cpu()
        assert bool(dropped[-1]) and torch.equal(y.cpu()[dropped], torch.zeros_like(y.cpu()[dropped]))


@pytest.mark.parametrize("device", DEVICES)
def test_back_to_back_calls_reusing_freed_memory(device, rng: np.random.Generator) -> None:
    # Routings and projections issued back to back, each routing freed before the next one is made:
    # the caching allocator hands its blocks (and the projection's workspace) to the next call, whose
    # routing and prologue then write where the call before still reads. On CUDA the calls are one
    # chain of programmatic launches, each kernel waiting for the one before at its first instruction;
    # a kernel that read or wrote before its wait would corrupt the earlier calls' outputs here.
    qtype, k, n, experts, top_k, tokens, rounds = QuantType.IQ4_NL, 32 * 8, 96, 8, 2, 64, 4
    w, s = random_weight(qtype, n, k, rng, experts=experts, device=device)
    xs = [torch.from_numpy(rng.standard_normal((tokens, k)).astype(np.float32)).to(device) for _ in range(rounds)]
    ids = [torch.from_numpy(random_ids(rng, tokens, top_k, experts)).to(device) for _ in range(rounds)]
    refs = [reference_projection(x, w, qtype, s, i, top_k) for x, i in zip(xs, ids, strict=True)]
    for block in (16, 64):
        outs = []
        for x, i in zip(xs, ids, strict=True):  # no host read between the calls
            routing = moe_align(i, experts, block)
            outs.append(moe_batched(x, w, qtype, routing, top_k, tokens * top_k, scales=s))
            del routing
        int8 = device == "cuda" and moe_batched_int8(qtype, block, device)
        for r, (y, ref) in enumerate(zip(outs, refs, strict=True)):
            assert rel_err(y, ref) < (VEC_LAYER_BOUND[device] if int8 else BOUND[device]), f"block {block}, call {r}"


def silu_and_mul(h: torch.Tensor) -> torch.Tensor:
    i = h.shape[-1] // 2
    return torch.nn.functional.silu(h[:, :i]) * h[:, i:]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("path", ["ggml_moe_a8", "ggml_moe_a8_vec"])
def test_server_gguf_moe_call_sequence(device, path, rng: np.random.Generator) -> None:
    """Replays a server's two-projection GGUF MoE layer through the compat ops and compares with
    lowbit.fused_moe on the CPU (the reference MoE)."""
    tokens, hidden, inter, experts, top_k = 19, 512, 256, 8, 3
    t13, t2 = QuantType.IQ3_S, QuantType.Q5_0
    w13, _ = random_weight(t13, 2 * inter, hidden, rng, experts=experts, device=device)
    w2, _ = random_weight(t2, hidden, inter, rng, experts=experts, device=device)
    x = torch.from_numpy(rng.standard_normal((tokens, hidden)).astype(np.float32)).to(device)
    ids = torch.from_numpy(np.stack([rng.choice(experts, top_k, replace=False) for _ in range(tokens)])).to(device)
    ids = ids.to(torch.int32)
    weights = torch.from_numpy(rng.random((tokens, top_k)).astype(np.float32)).to(device)
    if path == "ggml_moe_a8":
        block = ggml_moe_get_block_size(int(t13))
        routing = moe_align(ids, experts, block)
        h = ggml_moe_a8(
            x,
            w13,
            routing.sorted_pair_ids,
            routing.block_experts,
            routing.num_padded,
            int(t13),
            2 * inter,
            top_k,
            tokens,
        )
        y = ggml_moe_a8(
            silu_and_mul(h),
            w2,
            routing.sorted_pair_ids,
            routing.block_experts,
            routing.num_padded,
            int(t2),
            hidden,
            1,
            tokens * top_k,
        )
    else:
        h = ggml_moe_a8_vec(x, w13, ids, top_k, int(t13), 2 * inter, tokens)
        y = ggml_moe_a8_vec(silu_and_mul(h), w2, ids, 1, int(t2), hidden, tokens * top_k)
    assert h.shape == (tokens * top_k, 2 * inter) and y.shape == (tokens * top_k, hidden)
    out = (y.view(tokens, top_k, hidden) * weights[..., None]).sum(1)
    ref = lowbit.fused_moe(x.cpu(), w13.cpu(), w2.cpu(), weights.cpu(), ids.cpu(), w13_type=t13, w2_type=t2)
    assert rel_err(out, ref) < (VEC_LAYER_BOUND if path == "ggml_moe_a8_vec" else BOUND)[device]


def test_block_size_and_its_errors() -> None:
    assert ggml_moe_get_block_size(int(QuantType.IQ4_XS)) == 64 == lowbit.moe.BLOCK_SIZE
    # as sgl-kernel (and lowbit's dense compat ops): RuntimeError, which servers catch to fall back
    with pytest.raises(RuntimeError, match="type: Unsupported GGUF MoE type 9"):
        ggml_moe_get_block_size(int(QuantType.Q8_1))
    with pytest.raises(RuntimeError, match=f"type: Unsupported GGUF MoE type {int(QuantType.MXFP8_E4M3)}"):
        ggml_moe_get_block_size(int(QuantType.MXFP8_E4M3))


@pytest.mark.parametrize("device", DEVICES)
def test_moe_layer_names_its_kernel(device, rng: np.random.Generator) -> None:
    tokens, hidden, inter, experts, top_k = 5, 256, 256, 4, 2
    w13, _ = random_weight(QuantType.IQ4_XS, 2 * inter, hidden, rng, experts=experts, device=device)
    w2, _ = random_weight(QuantType.IQ2_XXS, hidden, inter, rng, experts=experts, device=device)
    x = torch.from_numpy(rng.standard_normal((tokens, hidden)).astype(np.float32)).to(device)
    ids = torch.from_numpy(rng.integers(0, experts, (tokens, top_k))).to(device)
    weights = torch.rand(tokens, top_k, device=device)
    kw = {"w13_type": QuantType.IQ4_XS, "w2_type": QuantType.IQ2_XXS}
    ref = lowbit.fused_moe(x.cpu(), w13.cpu(), w2.cpu(), weights.cpu(), ids.cpu(), **kw)
    # the batched path multiplies in int8 where the grouped MMQ's int8 path was measured faster for
    # a projection's type at the layer's routing block: then it has the int8 MMVQ's bound
    block = moe_block_size(tokens * top_k, experts, device)
    batched_int8 = device == "cuda" and any(moe_batched_int8(t, block, device) for t in kw.values())
    for kernel in ["auto"] + (["moe_vec", "moe_batched"] if device == "cuda" else []):
        out = moe_layer(x, w13, w2, weights, ids, route=kernel, **kw)
        bf16_bound = kernel == "moe_batched" and not batched_int8
        assert rel_err(out, ref) < (BOUND if bf16_bound else VEC_LAYER_BOUND)[device], kernel
    with pytest.raises(ValueError, match="kernel"):
        moe_layer(x, w13, w2, weights, ids, route="mmq", **kw)
    if device == "cpu":
        with pytest.raises(ValueError, match="CUDA"):
            moe_layer(x, w13, w2, weights, ids, route="moe_batched", **kw)


@pytest.mark.parametrize("device", DEVICES)
def test_errors_name_the_argument(device, rng: np.random.Generator) -> None:
    w, _ = random_weight(QuantType.IQ4_NL, 64, 64, rng, experts=3, device=device)
    x = torch.randn(4, 64, device=device)
    ids = torch.zeros(4, 2, dtype=torch.int64, device=device)
    q = QuantType.IQ4_NL
    with pytest.raises(ValueError, match="topk_ids must be int32 or int64"):
        moe_vec(x, w, q, ids.float(), 2)
    with pytest.raises(ValueError, match="x has 2 rows"):
        moe_vec(x[:2], w, q, ids, 2)
    with pytest.raises(ValueError, match="expert_range"):
        moe_vec(x, w, q, ids, 2, expert_range=(0, 5))
    with pytest.raises(ValueError, match="w must be 3-D"):
        moe_vec(x, w[0], q, ids, 2)
    with pytest.raises(ValueError, match="num_experts"):
        moe_align(ids, 0)
    with pytest.raises(ValueError, match="num_experts"):
        moe_align(ids, 513)
    with pytest.raises(ValueError, match="block_size"):
        moe_align(ids, 3, 0)
    short = moe_align(ids, 3, 8)._replace(block_size=64)  # routing for a smaller block than it claims
    with pytest.raises(ValueError, match="sorted_pair_ids"):
        moe_batched(x, w, q, short, 2, 8)
    with pytest.raises(ValueError, match="block_size must be in"):
        moe_batched(x, w, q, moe_align(ids, 3)._replace(block_size=0), 2, 8)
    routing = moe_align(ids, 3)
    with pytest.raises(ValueError, match="sorted_pair_ids must be a 1-D int32"):
        moe_batched(x, w, q, routing._replace(sorted_pair_ids=routing.sorted_pair_ids.long()), 2, 8)
    with pytest.raises(ValueError, match="pair_slots must be a 1-D int32"):
        moe_batched(x, w, q, routing._replace(pair_slots=routing.pair_slots.long()), 2, 8)
    with pytest.raises(ValueError, match="pair_slots has 7 elements; it must hold one slot per pair"):
        torch.ops.lowbit.moe_batched(
            x, w, int(q), *routing[:3], 2, 8, block_size=routing.block_size, pair_slots=routing.pair_slots[:7]
        )
    wide = moe_align(ids, 5)  # made for more experts than w holds
    with pytest.raises(ValueError, match="pair_slots: the routing must be moe_align's for w's E = 3"):
        moe_batched(x, w, q, wide, 2, 8)
    with pytest.raises(ValueError, match="row"):
        ggml_moe_a8_vec(x, w, ids, 2, int(q), 65, 4)
    with pytest.raises(ValueError, match="tokens"):
        ggml_moe_a8_vec(x, w, ids, 2, int(q), 64, 3)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_moe_ops(device, rng: np.random.Generator) -> None:
    q = QuantType.IQ4_NL
    w, _ = random_weight(q, 40, 64, rng, experts=3, device=device)
    x = torch.from_numpy(rng.standard_normal((5, 64)).astype(np.float32)).to(device)
    ids = torch.from_numpy(rng.integers(-1, 4, (5, 2))).to(device)
    torch.library.opcheck(torch.ops.lowbit.moe_align.default, (ids, 3, 64), {"expert_range": [0, 3]})
    torch.library.opcheck(torch.ops.lowbit.moe_vec.default, (x, w, int(q), ids, 2))
    r = moe_align(ids, 3)
    args = (x, w, int(q), r.sorted_pair_ids, r.block_experts, r.num_padded, 2, 10)
    torch.library.opcheck(torch.ops.lowbit.moe_batched.default, args)
    torch.library.opcheck(torch.ops.lowbit.moe_batched.default, args, {"pair_slots": r.pair_slots})
    r16 = moe_align(ids, 3, 16)
    args16 = (x, w, int(q), r16.sorted_pair_ids, r16.block_experts, r16.num_padded, 2, 10)
    torch.library.opcheck(torch.ops.lowbit.moe_batched.default, args16, {"block_size": 16})
    d, s = random_weight(QuantType.MXFP8_E4M3, 40, 64, rng, experts=3, device=device)
    torch.library.opcheck(torch.ops.lowbit.moe_vec.default, (x, d, int(QuantType.MXFP8_E4M3), ids, 2), {"scales": s})
    w13, _ = random_weight(q, 64, 64, rng, experts=3, device=device)
    w2, _ = random_weight(QuantType.Q5_0, 64, 32, rng, experts=3, device=device)
    kwargs = {"w13_type": int(q), "w2_type": int(QuantType.Q5_0), "activation": "gelu_tanh"}
    torch.library.opcheck(
        torch.ops.lowbit.moe_layer.default, (x, w13, w2, torch.rand(5, 2, device=device), ids), kwargs
    )


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_compat_moe_ops(device, rng: np.random.Generator) -> None:
    q = QuantType.IQ4_NL
    w, _ = random_weight(q, 40, 64, rng, experts=3, device=device)
    x = torch.from_numpy(rng.standard_normal((5, 64)).astype(np.float32)).to(device)
    ids = torch.from_numpy(rng.integers(0, 3, (5, 2))).to(device, torch.int32)
    r = moe_align(ids, 3, ggml_moe_get_block_size(int(q)))
    a8_args = (x, w, r.sorted_pair_ids, r.block_experts, r.num_padded, int(q), 40, 2, 5)
    torch.library.opcheck(torch.ops.lowbit.ggml_moe_a8.default, a8_args)
    torch.library.opcheck(torch.ops.lowbit.ggml_moe_a8_vec.default, (x, w, ids, 2, int(q), 40, 5))
