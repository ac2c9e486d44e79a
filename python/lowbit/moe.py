"""Low-level MoE ops for servers that run their own MoE pipeline: routing (moe_align) and one
projection over the routed pairs (moe_vec for few tokens, moe_batched for many), plus moe_layer,
lowbit.fused_moe with the kernel named.

A pair is one (token, k) choice: pair p = token * top_k + k, its expert topk_ids.flatten()[p].
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from . import _api  # noqa: F401  (loads the extension and the fakes)
from ._types import QTypeLike, as_quant_type

BLOCK_SIZE = 64  # moe_align's default block_size (rows of sorted pairs per routing block)


class MoeRouting(NamedTuple):
    """moe_align's result (the moe_align_block_size convention of vLLM and sgl-kernel)."""

    sorted_pair_ids: torch.Tensor  # int32 [pairs + E * (block - 1)]: pairs grouped by expert, padded with `pairs`
    block_experts: torch.Tensor  # int32 [blocks]: the local expert of each block, -1 past num_padded
    num_padded: torch.Tensor  # int32 [1]: sorted rows in use
    pair_slots: torch.Tensor  # int32 [pairs]: the sorted row of each pair, -1 for dropped pairs
    block_size: int = BLOCK_SIZE  # the block_size it was made with


def _range(expert_range: Sequence[int] | None) -> list[int] | None:
    return None if expert_range is None else [int(v) for v in expert_range]


def moe_align(
    topk_ids: torch.Tensor,
    num_experts: int,
    block_size: int = BLOCK_SIZE,
    *,
    expert_range: Sequence[int] | None = None,
) -> MoeRouting:
    """Group the (token, k) pairs by local expert, each expert's run padded to `block_size`.

    Args:
        topk_ids: int32 / int64 [T, top_k] global expert ids.
        num_experts: E, the experts held locally.
        block_size: the padding unit; moe_batched runs fastest with `moe_block_size`'s.
        expert_range: (start, end) global ids held here; ids outside it (and negative ones) are
            dropped. Default (0, E).

    On CUDA it runs on the device without a host synchronization (CUDA-graph capturable);
    pairs keep their order within an expert.
    """
    out = torch.ops.lowbit.moe_align(topk_ids, int(num_experts), int(block_size), expert_range=_range(expert_range))
    return MoeRouting(*out, block_size=int(block_size))


def moe_block_size(pairs: int, experts: int, device: torch.device | str | None = None) -> int:
    """The routing block size moe_batched runs fastest with for `pairs` (token, k) pairs over
    `experts` local experts: on Hopper the grouped MMQ token tile (16, 32, 48, 64 or 128) that holds
    1.5x an average expert's pairs, elsewhere 64."""
    dev = torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return int(torch.ops.lowbit.moe_block_size(int(pairs), int(experts), dev))


def moe_batched_int8(qtype: QTypeLike, block_size: int, device: torch.device | str | None = None) -> bool:
    """Whether moe_batched (math "auto") and fused_moe's batched path multiply type `qtype` in
    int8 at routing blocks of `block_size` on `device`: the grouped MMQ kernel (Hopper) where its
    int8 path was measured faster (IQ4_XS, IQ4_NL, IQ1_S up to 32-row blocks; IQ2_XXS, IQ3_XXS,
    IQ3_S at 16-row blocks), else bf16."""
    dev = torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return bool(torch.ops.lowbit.moe_batched_int8(int(as_quant_type(qtype)), int(block_size), dev))


def moe_vec(
    x: torch.Tensor,
    w: torch.Tensor,
    qtype: QTypeLike,
    topk_ids: torch.Tensor,
    top_k: int,
    *,
    scales: torch.Tensor | None = None,
    expert_range: Sequence[int] | None = None,
) -> torch.Tensor:
    """out[p] = W[e(p)] @ x[p // top_k] for every pair p, the vector kernel (few tokens).

    Args:
        x: [rows, K] float32 / bfloat16 / float16 (rounded to bf16 on CUDA).
        w: [E, N, row_bytes(K)] quantized experts (scales [E, N, K/32] for split MX types).
        topk_ids: [T, top_k] (or any shape of `pairs` ids) int32 / int64.
        top_k: pairs per row of x (1 when x holds one row per pair).

    Returns:
        [pairs, N] in x's dtype; rows of pairs whose expert is not local are zero.
    """
    q = as_quant_type(qtype)
    return torch.ops.lowbit.moe_vec(
        x, w, int(q), topk_ids, int(top_k), scales=scales, expert_range=_range(expert_range)
    )


def moe_batched(
    x: torch.Tensor,
    w: torch.Tensor,
    qtype: QTypeLike,
    routing: MoeRouting,
    top_k: int,
    pairs: int,
    *,
    scales: torch.Tensor | None = None,
    math: str = "auto",
) -> torch.Tensor:
    """The projection of `moe_vec` over moe_align's routing (any block_size; the one it was made
    with travels in `routing.block_size`), the batched kernel. math "int8" (Hopper's grouped MMQ,
    routing blocks of 16 to 64, types with a 32-weight int8 form) multiplies int8 codes with the
    activations quantized per token and 32 values, "bf16" rounds the activations to bf16, "auto"
    takes int8 where `moe_batched_int8` says it was measured faster.

    Returns:
        [pairs, N] in x's dtype; rows of dropped pairs are zero.
    """
    q = as_quant_type(qtype)
    return torch.ops.lowbit.moe_batched(
        x,
        w,
        int(q),
        routing.sorted_pair_ids,
        routing.block_experts,
        routing.num_padded,
        int(top_k),
        int(pairs),
        scales=scales,
        block_size=int(routing.block_size),
        math=math,
        # the kernels write the dropped pairs' zeros from the slots; a call over fewer pairs than
        # the routing's zeroes the whole output first instead
        pair_slots=routing.pair_slots if routing.pair_slots.numel() == pairs else None,
    )


def select_moe_kernel(
    w13_type: QTypeLike,
    w2_type: QTypeLike,
    tokens: int,
    experts: int,
    top_k: int,
    hidden: int,
    intermediate: int,
    device: torch.device | str | None = None,
) -> str:
    """The kernel lowbit.fused_moe runs for this shape: "moe_vec" or "moe_batched"."""
    dev = torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    kernel = torch.ops.lowbit.moe_select_kernel(
        int(as_quant_type(w13_type, "w13_type")),
        int(as_quant_type(w2_type, "w2_type")),
        int(tokens),
        int(experts),
        int(top_k),
        int(hidden),
        int(intermediate),
        dev,
    )
    return ("moe_vec", "moe_batched")[kernel]


def moe_layer(
    x: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    *,
    w13_type: QTypeLike,
    w2_type: QTypeLike,
    activation: str = "silu",
    w13_scales: torch.Tensor | None = None,
    w2_scales: torch.Tensor | None = None,
    expert_range: Sequence[int] | None = None,
    route: str = "auto",
) -> torch.Tensor:
    """lowbit.fused_moe with the kernel named by `route`: "auto" (the dispatcher), "moe_vec" or
    "moe_batched" (CUDA only; benchmarks and tests)."""
    return torch.ops.lowbit.moe_layer(
        x,
        w13,
        w2,
        topk_weights,
        topk_ids,
        w13_type=int(as_quant_type(w13_type, "w13_type")),
        w2_type=int(as_quant_type(w2_type, "w2_type")),
        activation=activation,
        w13_scales=w13_scales,
        w2_scales=w2_scales,
        expert_range=_range(expert_range),
        route=route,
    )
