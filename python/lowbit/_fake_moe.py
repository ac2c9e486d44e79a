"""Meta / fake-tensor implementations of the MoE ops (moe_align, moe_vec, moe_batched, moe_layer).

The same shape rules as csrc/torch/moe_op_plans.cpp, with torch._check; values are the kernels'
business. The GGUF-compatible ops (ggml_moe_a8, ggml_moe_a8_vec) are composites of these.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ._fake import _check_math, _fused_moe_fake, _same_device, _weight_k

MOE_BLOCK_SIZE = 64  # kMoeBlockSize: the batched kernel's rows per routing block
MOE_MAX_EXPERTS = 512


def _check_ids(ids: torch.Tensor, name: str) -> None:
    if ids.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"{name} must be int32 or int64, got {ids.dtype}")


def _check_x(x: torch.Tensor, w: torch.Tensor, qtype: int, pairs: int | torch.SymInt, top_k: int) -> None:
    torch._check(w.dim() == 3, lambda: f"w must be 3-D [E, N, row_bytes], got {w.dim()}-D")
    torch._check(x.dim() == 2, lambda: "x must be 2-D [rows, K]")
    k = _weight_k(w, qtype, "w")
    torch._check(x.shape[1] == k, lambda: "x must have K columns (from w's rows)")
    torch._check(top_k >= 1, lambda: "top_k must be >= 1")
    torch._check(x.shape[0] * top_k >= pairs, lambda: "x has too few rows for the pairs (pair p reads row p / top_k)")


@torch.library.register_fake("lowbit::moe_align")
def _moe_align_fake(
    topk_ids: torch.Tensor, num_experts: int, block_size: int = 64, *, expert_range: Sequence[int] | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    _check_ids(topk_ids, "topk_ids")
    if not 1 <= num_experts <= MOE_MAX_EXPERTS:
        raise ValueError(f"num_experts must be in [1, {MOE_MAX_EXPERTS}], got {num_experts}")
    if not 1 <= block_size <= 1024:
        raise ValueError(f"block_size must be in [1, 1024], got {block_size}")
    pairs = topk_ids.numel()
    capacity = pairs + num_experts * (block_size - 1)
    blocks = (capacity + block_size - 1) // block_size
    i32 = {"dtype": torch.int32}
    return (
        topk_ids.new_empty((capacity,), **i32),
        topk_ids.new_empty((blocks,), **i32),
        topk_ids.new_empty((1,), **i32),
        topk_ids.new_empty((pairs,), **i32),
    )


@torch.library.register_fake("lowbit::moe_vec")
def _moe_vec_fake(
    x: torch.Tensor,
    w: torch.Tensor,
    qtype: int,
    topk_ids: torch.Tensor,
    top_k: int,
    *,
    scales: torch.Tensor | None = None,
    expert_range: Sequence[int] | None = None,
) -> torch.Tensor:
    _same_device(w=w, x=x, topk_ids=topk_ids, scales=scales)
    _check_ids(topk_ids, "topk_ids")
    pairs = topk_ids.numel()
    _check_x(x, w, qtype, pairs, top_k)
    return x.new_empty((pairs, w.shape[1]))


@torch.library.register_fake("lowbit::moe_batched")
def _moe_batched_fake(
    x: torch.Tensor,
    w: torch.Tensor,
    qtype: int,
    sorted_pair_ids: torch.Tensor,
    block_experts: torch.Tensor,
    num_padded: torch.Tensor,
    top_k: int,
    pairs: int,
    *,
    scales: torch.Tensor | None = None,
    block_size: int = MOE_BLOCK_SIZE,
    math: str = "auto",
    pair_slots: torch.Tensor | None = None,
) -> torch.Tensor:
    _check_math(math, qtype, "moe_batched")
    _same_device(
        w=w,
        x=x,
        sorted_pair_ids=sorted_pair_ids,
        block_experts=block_experts,
        num_padded=num_padded,
        scales=scales,
        pair_slots=pair_slots,
    )
    vectors = [("sorted_pair_ids", sorted_pair_ids), ("block_experts", block_experts), ("num_padded", num_padded)]
    if pair_slots is not None:
        vectors.append(("pair_slots", pair_slots))
    for name, t in vectors:
        if t.dtype != torch.int32 or t.dim() != 1:
            raise ValueError(f"{name} must be a 1-D int32 tensor")
    _check_x(x, w, qtype, pairs, top_k)
    if not 1 <= block_size <= 1024:
        raise ValueError(f"block_size must be in [1, 1024], got {block_size}")
    torch._check(
        sorted_pair_ids.shape[0] >= pairs + w.shape[0] * (block_size - 1),
        lambda: "sorted_pair_ids is shorter than pairs + E * (block - 1)",
    )
    if pair_slots is not None:
        torch._check_value(
            pair_slots.shape[0] == pairs,
            lambda: (
                f"pair_slots has {pair_slots.shape[0]} elements; it must hold one slot per pair ({pairs}), "
                "as moe_align returns it"
            ),
        )
        need = pairs + w.shape[0] * (block_size - 1)
        torch._check_value(
            sorted_pair_ids.shape[0] == need,
            lambda: (
                f"pair_slots: the routing must be moe_align's for w's E = {w.shape[0]} experts and block_size "
                f"{block_size} ({need} sorted rows); sorted_pair_ids has {sorted_pair_ids.shape[0]}"
            ),
        )
    return x.new_empty((pairs, w.shape[1]))


@torch.library.register_fake("lowbit::moe_layer")
def _moe_layer_fake(
    x: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    *,
    w13_type: int,
    w2_type: int,
    activation: str = "silu",
    w13_scales: torch.Tensor | None = None,
    w2_scales: torch.Tensor | None = None,
    expert_range: Sequence[int] | None = None,
    route: str = "auto",
) -> torch.Tensor:
    if route not in ("auto", "moe_vec", "moe_batched"):
        raise ValueError(f'route: unknown MoE kernel "{route}" (auto, moe_vec, moe_batched)')
    return _fused_moe_fake(
        x,
        w13,
        w2,
        topk_weights,
        topk_ids,
        w13_type=w13_type,
        w2_type=w2_type,
        activation=activation,
        w13_scales=w13_scales,
        w2_scales=w2_scales,
        expert_range=expert_range,
    )
