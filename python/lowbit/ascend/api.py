"""``lowbit.ascend.linear`` / ``lowbit.ascend.fused_moe``: lowbit's stateless API on NPU tensors.

The weights arrive in lowbit's formats (split MX elements + [N, K/32] scales, or GGUF MXFP4 blocks);
the first call prepares them for torch_npu (scale pairing, transposed views, FRACTAL_NZ) and caches the
prepared layer for as long as the weight tensor lives and is not modified in place.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from . import _device, layout
from .dense import NpuLinear, W4A4Mxfp4Linear, W4A8Mxfp4Linear, W8A8Mxfp8Linear, w4a8_n_problem
from .moe import MxExperts, NpuMoE

# lowbit's quant type ids (python/lowbit/_types.py): the MX types this backend covers.
MXFP4_GGUF, MXFP8_E4M3, MXFP4_SPLIT = 39, 1001, 1002
_TYPE_NAMES = {"mxfp4": MXFP4_GGUF, "mxfp8_e4m3": MXFP8_E4M3, "mxfp4_split": MXFP4_SPLIT}
COVERED_TYPES = tuple(_TYPE_NAMES)

# Which dense scheme the stateless API uses for MXFP4 weights: FP8 activations (W4A8, the more accurate
# of the two) or FP4 activations ("w4a4_mxfp4"). A weight whose N breaks the W4A8 rule (N % 8) runs W4A4.
# Prepared layers (lowbit.ascend.prepare_linear) choose freely.
MXFP4_LINEAR_SCHEME = "w4a8_mxfp4"

QTypeLike = int | str


def quant_type_id(qtype: QTypeLike, arg: str = "qtype") -> int:
    """lowbit's id of an MX quant type given as a QuantType, an int id or a lower-case name."""
    if isinstance(qtype, bool):
        raise TypeError(f"{arg}: expected a quant type, got bool")
    if isinstance(qtype, int):  # includes lowbit.QuantType (an IntEnum)
        value = int(qtype)
    elif isinstance(qtype, str):
        if qtype.lower() not in _TYPE_NAMES:
            raise ValueError(f"{arg}: the Ascend backend covers {COVERED_TYPES} only, got {qtype!r}")
        value = _TYPE_NAMES[qtype.lower()]
    else:
        raise TypeError(f"{arg}: expected a QuantType, name or int id, got {type(qtype).__name__}")
    if value not in _TYPE_NAMES.values():
        raise ValueError(f"{arg}: the Ascend backend covers {COVERED_TYPES} only (ids 1001, 1002, 39), got {value}")
    return value


class _PreparedCache:
    """Prepared layers keyed by the identity of the weight tensors, dropped when a weight dies; an
    in-place change of a weight (its _version) or a new device re-prepares."""

    def __init__(self) -> None:
        self._entries: dict[tuple[int, ...], tuple[tuple[Any, ...], Any]] = {}

    @staticmethod
    def _stamp(tensors: Sequence[torch.Tensor | None], extra: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple((t._version, t.device) if t is not None else None for t in tensors) + extra

    def get_or_make(
        self, tensors: Sequence[torch.Tensor | None], extra: tuple[Any, ...], make: Callable[[], Any]
    ) -> Any:
        key = tuple(id(t) for t in tensors) + (hash(extra),)
        stamp = self._stamp(tensors, extra)
        hit = self._entries.get(key)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        prepared = make()
        self._entries[key] = (stamp, prepared)
        for t in tensors:
            if t is not None:
                weakref.finalize(t, self._entries.pop, key, None)
        return prepared

    def clear(self) -> None:
        self._entries.clear()


_CACHE = _PreparedCache()


def clear_cache() -> None:
    """Forget every prepared layer (the next call prepares again)."""
    _CACHE.clear()


def _require_npu(x: torch.Tensor, arg: str = "x") -> None:
    if not _device.is_npu_tensor(x):
        device = x.device if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{arg}: lowbit.ascend runs on NPU tensors, got {device}")


def _detached(t: torch.Tensor | None, device: torch.device) -> torch.Tensor | None:
    """t on `device` as a new tensor object: the prepared layer's views then keep the storage alive but not
    the caller's tensor object, whose death evicts the cache entry."""
    return None if t is None else t.to(device).detach()


def _split_mx(
    qtype: int, w: torch.Tensor, scales: torch.Tensor | None, arg: str, scales_arg: str
) -> tuple[torch.Tensor, torch.Tensor, str]:
    """(elements, scales [..., N, K/32], element kind) of a weight in any covered type."""
    if qtype == MXFP4_GGUF:
        if scales is not None:
            raise ValueError(f"{scales_arg}: must be None for GGUF mxfp4 (its scales live inside the blocks)")
        if w.dtype != torch.uint8:
            raise ValueError(f"{arg}: GGUF mxfp4 blocks must be uint8, got {w.dtype}")
        elements, split_scales = layout.gguf_mxfp4_to_split(w)
        return elements, split_scales, "mxfp4"
    if scales is None:
        raise ValueError(f"{scales_arg}: required for split MX types (E8M0 [..., N, K/32])")
    return w, scales, "mxfp4" if qtype == MXFP4_SPLIT else "mxfp8"


def linear(
    x: torch.Tensor,
    w: torch.Tensor,
    qtype: QTypeLike,
    *,
    scales: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """y = x @ W^T (+ bias) on the NPU, for lowbit's MX weight types.

    Args:
        x: [..., K] bfloat16 / float16 / float32 NPU tensor.
        w: mxfp8_e4m3: E4M3 bytes [N, K] (uint8 or float8_e4m3fn); mxfp4_split: packed E2M1 [N, K/2] (even
            element in the low nibble); mxfp4 (GGUF): uint8 blocks [N, K/32 * 17]. Any device: prepared once
            on x's device and cached.
        qtype: one of those three (QuantType, name or id).
        scales: E8M0 [N, K/32] (uint8 or float8_e8m0fnu) for the split types; None for GGUF mxfp4.
        bias: optional [N].

    Returns:
        [..., N] in x's dtype. MXFP8 weights run W8A8 MXFP8; MXFP4 weights run MXFP4_LINEAR_SCHEME (W4A4
        when N % 8 != 0, which W4A8 cannot take).
    """
    _require_npu(x)
    q = quant_type_id(qtype)
    if q == MXFP8_E4M3:
        scheme_cls: type[NpuLinear] = W8A8Mxfp8Linear
    elif MXFP4_LINEAR_SCHEME == "w4a8_mxfp4" and not (w.dim() >= 1 and w4a8_n_problem(w.shape[0])):
        scheme_cls = W4A8Mxfp4Linear
    else:
        scheme_cls = W4A4Mxfp4Linear

    def make() -> NpuLinear:
        elements, split_scales, _ = _split_mx(q, _detached(w, x.device), _detached(scales, x.device), "w", "scales")
        return scheme_cls.from_checkpoint(elements, split_scales)  # type: ignore[attr-defined]

    prepared: NpuLinear = _CACHE.get_or_make((w, scales), ("linear", q, scheme_cls.__name__), make)
    return prepared.forward(x, bias=None if bias is None else bias.to(x.device))


def fused_moe(
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
    num_global_experts: int | None = None,
) -> torch.Tensor:
    """A Mixture-of-Experts layer on the NPU, for lowbit's MX weight types (same contract as lowbit.fused_moe).

    Args:
        x: [T, H] NPU tensor, bfloat16 / float16 / float32.
        w13: [E, 2I, row(H)] gate rows then up rows; w2: [E, H, row(I)] (MXFP8 runs W8A8, MXFP4 runs W4A4;
            the two may differ).
        topk_weights: [T, k] float; topk_ids: [T, k] int32 / int64 global ids (invalid ones contribute 0).
        activation: "silu" (SwiGLU: silu(gate) * up) is the only one the NPU path fuses.
        w13_scales, w2_scales: E8M0 [E, N, K/32] for the split types.
        expert_range: (start, end): the weights hold global experts [start, end); runs the
            expert-parallel variant (bf16 dispatch, quantization inside). None: the tensor-parallel path.
        num_global_experts: the model's expert count; required with expert_range (the routing op takes it
            as expert_num, and ids must lie below it).

    Returns:
        [T, H] in x's dtype.
    """
    _require_npu(x)
    if activation != "silu":
        raise ValueError(f"activation: the Ascend MoE path fuses SwiGLU ('silu') only, got {activation!r}")
    a = quant_type_id(w13_type, "w13_type")
    b = quant_type_id(w2_type, "w2_type")

    def make() -> NpuMoE:
        dev = x.device
        e13, s13, k13 = _split_mx(a, _detached(w13, dev), _detached(w13_scales, dev), "w13", "w13_scales")
        e2, s2, k2 = _split_mx(b, _detached(w2, dev), _detached(w2_scales, dev), "w2", "w2_scales")
        return NpuMoE(MxExperts.from_checkpoint(e13, s13, k13, "w13"), MxExperts.from_checkpoint(e2, s2, k2, "w2"))

    prepared: NpuMoE = _CACHE.get_or_make((w13, w13_scales, w2, w2_scales), ("moe", a, b), make)
    return prepared(
        x,
        topk_weights.to(x.device),
        topk_ids.to(x.device),
        expert_range=expert_range,
        num_global_experts=num_global_experts,
    )
