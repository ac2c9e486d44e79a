"""The GGUF MoE functions servers call (sgl-kernel's and vLLM's names and arguments), backed by
lowbit's kernels: torch.ops.lowbit.ggml_moe_a8 / ggml_moe_a8_vec / ggml_moe_get_block_size.

A server's GGUF MoE layer calls, for tokens x [T, H] and w13 [E, 2I, .], w2 [E, H, .]:
    block = ggml_moe_get_block_size(type)
    sorted_ids, expert_ids, num_post_pad = <moe_align_block_size>(topk_ids, block, E)  # or lowbit.moe.moe_align
    h = ggml_moe_a8(x, w13, sorted_ids, expert_ids, num_post_pad, type, 2I, top_k, T)   # [T * top_k, 2I]
    a = act(h[:, :I]) * h[:, I:]
    y = ggml_moe_a8(a, w2, sorted_ids, expert_ids, num_post_pad, type2, H, 1, T * top_k)
    out = (y.view(T, top_k, H) * topk_weights[..., None]).sum(1)
or the same through ggml_moe_a8_vec(x, w, topk_ids, top_k, type, row, tokens) for few tokens.
"""

from __future__ import annotations

import torch

from . import _api  # noqa: F401  (loads the extension)


def ggml_moe_get_block_size(qtype: int) -> int:
    """Rows of sorted pairs per block of the batched kernel (the routing's block_size)."""
    return int(torch.ops.lowbit.ggml_moe_get_block_size(int(qtype)))


def ggml_moe_a8(
    x: torch.Tensor,
    w: torch.Tensor,
    sorted_token_ids: torch.Tensor,
    expert_ids: torch.Tensor,
    num_tokens_post_padded: torch.Tensor,
    qtype: int,
    row: int,
    top_k: int,
    tokens: int,
) -> torch.Tensor:
    """[tokens * top_k, row]: row s = W[expert of s] @ x[s // top_k] over the routing."""
    return torch.ops.lowbit.ggml_moe_a8(
        x, w, sorted_token_ids, expert_ids, num_tokens_post_padded, int(qtype), int(row), int(top_k), int(tokens)
    )


def ggml_moe_a8_vec(
    x: torch.Tensor, w: torch.Tensor, topk_ids: torch.Tensor, top_k: int, qtype: int, row: int, tokens: int
) -> torch.Tensor:
    """[tokens * top_k, row]: row s = W[topk_ids.flatten()[s]] @ x[s // top_k]."""
    return torch.ops.lowbit.ggml_moe_a8_vec(x, w, topk_ids, int(top_k), int(qtype), int(row), int(tokens))
