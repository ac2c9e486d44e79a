"""Meta / fake-tensor implementations of the lowbit ops (torch.compile, FakeTensor, opcheck).

They live in Python so that symbolic shapes work; they enforce the same shape rules as the C++
kernels (csrc/torch/op_plans.cpp) with torch._check, and leave value checks to the kernels.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ._types import QuantType, as_quant_type, block_layout


def _block(qtype: int, arg: str = "qtype") -> tuple[QuantType, int, int]:
    q = as_quant_type(qtype, arg)
    if q is QuantType.Q8_1:
        raise ValueError(f"{arg}: q8_1 is an activation format, not a weight type")
    elems, nbytes = block_layout(q, arg)
    return q, elems, nbytes


def _same_device(**tensors: torch.Tensor | None) -> None:
    """The C++ kernels' rule: every tensor of a call on one device (checked here for fake calls)."""
    named = [(n, t) for n, t in tensors.items() if t is not None]
    first_name, first = named[0]
    for name, t in named[1:]:
        if t.device != first.device:
            raise ValueError(
                f"{name} is on {t.device} but {first_name} is on {first.device}; "
                "all tensors of a call must be on one device"
            )


def _weight_k(w: torch.Tensor, qtype: int, arg: str, type_arg: str = "qtype") -> torch.SymInt | int:
    _, elems, nbytes = _block(qtype, type_arg)
    row_bytes = w.shape[-1]
    torch._check(row_bytes % nbytes == 0, lambda: f"{arg}: rows are not whole blocks of {nbytes} bytes")
    return row_bytes // nbytes * elems


@torch.library.register_fake("lowbit::dequantize")
def _dequantize_fake(
    w: torch.Tensor,
    qtype: int,
    k: int = -1,
    *,
    scales: torch.Tensor | None = None,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    _same_device(w=w, scales=scales)
    torch._check(w.dim() in (2, 3), lambda: f"w must be 2-D or 3-D, got {w.dim()}-D")
    kk = _weight_k(w, qtype, "w")
    if k >= 0:
        torch._check(kk == k, lambda: f"k: {k} is inconsistent with w's rows")
    out_dtype = torch.float32 if dtype is None else dtype
    torch._check(out_dtype in (torch.float32, torch.bfloat16, torch.float16), lambda: "dtype must be a float type")
    return w.new_empty((*w.shape[:-1], kk), dtype=out_dtype)


@torch.library.register_fake("lowbit::linear")
def _linear_fake(
    x: torch.Tensor,
    w: torch.Tensor,
    qtype: int,
    *,
    scales: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    route: str = "auto",
) -> torch.Tensor:
    _same_device(w=w, x=x, scales=scales, bias=bias)
    torch._check(w.dim() == 2, lambda: f"w must be 2-D [N, row_bytes], got {w.dim()}-D")
    kk = _weight_k(w, qtype, "w")
    torch._check(x.shape[-1] == kk, lambda: "x must have shape [..., K] with K from w's rows")
    return x.new_empty((*x.shape[:-1], w.shape[0]))


def _check_math(math: str, qtype: int, mmq_op: str | None = None) -> None:
    """The ops' `math` argument as their CUDA planners check it: auto, bf16 or int8, and for MMQ's
    kernels (`mmq_op`: the op, in the message) int8 only for a type with a 32-weight int8 form."""
    if math not in ("auto", "bf16", "int8"):
        raise ValueError(f'math: unknown MMVQ arithmetic "{math}" (auto, bf16, int8)')
    if mmq_op is not None and math == "int8":
        from . import _C

        if not _C.mmq_int8_supported(int(qtype)):
            raise ValueError(f'math: "int8" {mmq_op} needs a type whose int8 form scales 32 weights at a time')


@torch.library.register_fake("lowbit::mmvq")
def _mmvq_fake(
    x: torch.Tensor, w: torch.Tensor, qtype: int, *, scales: torch.Tensor | None = None, math: str = "auto"
) -> torch.Tensor:
    _same_device(w=w, x=x, scales=scales)
    torch._check(x.dim() == 2 and 1 <= x.shape[0] <= 16, lambda: "x must be [M, K] with 1 <= M <= 16 for mmvq")
    _check_math(math, qtype)
    return _linear_fake(x, w, qtype, scales=scales)


@torch.library.register_fake("lowbit::mmq")
def _mmq_fake(
    x: torch.Tensor, w: torch.Tensor, qtype: int, *, scales: torch.Tensor | None = None, math: str = "auto"
) -> torch.Tensor:
    _check_math(math, qtype, "MMQ")
    return _linear_fake(x, w, qtype, scales=scales)


@torch.library.register_fake("lowbit::quantize")
def _quantize_fake(w: torch.Tensor, qtype: int, *, scale_rule: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    from . import _C

    info = next((t for t in _C.types() if t["id"] == int(qtype)), None)
    if info is None or not info["has_quantizer"]:
        raise ValueError(f"qtype: lowbit has no quantizer for type id {qtype}")
    k = w.shape[-1]
    torch._check(k % info["block_elems"] == 0, lambda: "w: K must be a multiple of the block")
    data = w.new_empty((*w.shape[:-1], k // info["block_elems"] * info["block_bytes"]), dtype=torch.uint8)
    if info["split_scales"]:
        scales = w.new_empty((*w.shape[:-1], k // 32), dtype=torch.uint8)
    else:
        scales = w.new_empty((0,), dtype=torch.uint8)
    return data, scales


@torch.library.register_fake("lowbit::fused_moe")
def _fused_moe_fake(
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
) -> torch.Tensor:
    _same_device(
        w13=w13, x=x, w2=w2, topk_weights=topk_weights, topk_ids=topk_ids, w13_scales=w13_scales, w2_scales=w2_scales
    )
    torch._check(x.dim() == 2 and w13.dim() == 3 and w2.dim() == 3, lambda: "x must be 2-D, w13 and w2 3-D")
    torch._check(_weight_k(w13, w13_type, "w13", "w13_type") == x.shape[1], lambda: "w13 K must equal H")
    _weight_k(w2, w2_type, "w2", "w2_type")
    torch._check(topk_ids.shape == topk_weights.shape, lambda: "topk_weights must have the shape of topk_ids")
    return x.new_empty(x.shape)
