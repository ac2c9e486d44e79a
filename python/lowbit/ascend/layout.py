"""The layout contracts between lowbit's split MX layout and torch_npu's MX ops (ascend-npu-ops.md
sections 3a, 4, 5), on top of lowbit's C++ layout ops (torch.ops.lowbit.mx_pair_scales and friends).

- Scales: checkpoint [..., N, K/32] -> paired [..., N, ceil(K/64), 2] (odd K/32 padded with 0x00) ->
  the logical view [..., ceil(K/64), N, 2] the matmuls read (a transpose view, never copied).
- Weights: stored [..., N, K] (FP8) or [..., N, K/2] (packed FP4) -> the logical [..., K, N] /
  [..., K/2, N] transpose view; the matmuls detect the transposition from the strides.
- FRACTAL_NZ: cast the contiguous stored tensor first, then transpose (torch_npu skips the cast of a
  view, and after NZ only a transpose is allowed). Scales are never NZ-cast.
- K alignment: split MX layouts need K % 32 == 0; layers that break it fall back to bf16.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from . import _device
from ._dtypes import FORMAT_FRACTAL_NZ, e8m0_bytes, fp4_bytes

MX_BLOCK = 32
MIN_FP4_K = 4  # FP4 matmuls reject K = 2


def _layout_op(name: str) -> Callable[..., object]:
    try:
        return getattr(torch.ops.lowbit, name)
    except (AttributeError, RuntimeError) as e:
        raise RuntimeError(
            f"torch.ops.lowbit.{name} is missing: lowbit's C++ extension is not loaded "
            "(import lowbit after building it)"
        ) from e


def _on_host(fn: Callable[..., object], *tensors: torch.Tensor) -> object:
    """Run a CPU layout op; tensors on another device (an NPU) travel through host memory. These are
    load-time conversions, done once per weight."""
    device = tensors[0].device
    if all(t.device.type in ("cpu", "meta") for t in tensors):
        return fn(*tensors)
    result = fn(*(t.cpu() for t in tensors))
    if isinstance(result, tuple):
        return tuple(r.to(device) for r in result)
    return result.to(device)  # type: ignore[union-attr]


def pair_scales(scales: torch.Tensor) -> torch.Tensor:
    """E8M0 scales [..., N, K/32] (uint8 or float8_e8m0fnu) -> uint8 paired [..., N, ceil(K/64), 2];
    block j lands at [..., j // 2, j % 2]; an odd K/32 is padded with 0x00."""
    return _on_host(_layout_op("mx_pair_scales"), e8m0_bytes(scales, "scales"))  # type: ignore[return-value]


def unpair_scales(paired: torch.Tensor, k: int) -> torch.Tensor:
    """uint8 paired [..., N, ceil(K/64), 2] -> [..., N, K/32]; the padding byte of an odd K/32 must be 0x00."""
    op = _layout_op("mx_unpair_scales")
    return _on_host(lambda p: op(p, int(k)), e8m0_bytes(paired, "paired"))  # type: ignore[return-value]


def gguf_mxfp4_to_split(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """GGUF MXFP4 blocks uint8 [..., K/32 * 17] -> (elements uint8 [..., K/2] with the even element in the
    low nibble, scales uint8 [..., K/32]). GGUF keeps element j low and j + 16 high in each byte."""
    return _on_host(_layout_op("mxfp4_gguf_to_split"), blocks)  # type: ignore[return-value]


def split_to_gguf_mxfp4(elements: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """The inverse of gguf_mxfp4_to_split."""
    return _on_host(_layout_op("mxfp4_split_to_gguf"), fp4_bytes(elements, "elements"), e8m0_bytes(scales, "scales"))  # type: ignore[return-value]


def logical_weight(stored: torch.Tensor) -> torch.Tensor:
    """Stored [..., N, K] (or packed [..., N, K/2]) -> the logical [..., K, N] transpose view (no copy)."""
    return stored.transpose(-1, -2)


def logical_scale(paired: torch.Tensor) -> torch.Tensor:
    """Paired [..., N, G, 2] -> the logical [..., G, N, 2] view the MX matmuls take (no copy)."""
    return paired.transpose(-3, -2)


def nz_cast_then_transpose(
    stored: torch.Tensor, *, customize_dtype: torch.dtype | None = None, input_dtype: int | None = None
) -> torch.Tensor:
    """Cast the contiguous stored weight [..., N, K'] to FRACTAL_NZ, then present the logical [..., K', N]
    transpose view. The cast must come first: torch_npu skips casting a view or non-contiguous tensor."""
    if not stored.is_contiguous() or stored.storage_offset() != 0:
        raise ValueError(
            "stored: the FRACTAL_NZ cast needs the contiguous stored weight [..., N, K] (not a view); "
            f"got strides {stored.stride()} at offset {stored.storage_offset()}"
        )
    kwargs: dict[str, torch.dtype | int] = {}
    if customize_dtype is not None:
        kwargs["customize_dtype"] = customize_dtype
    if input_dtype is not None:
        kwargs["input_dtype"] = input_dtype
    nz = _device.torch_npu().npu_format_cast(stored, FORMAT_FRACTAL_NZ, **kwargs)
    return nz.transpose(-1, -2)


def k_alignment_problem(k: int, *, fp4: bool) -> str | None:
    """Why an MX layer with reduction length K cannot run on the MX path, or None when it can.

    The rule: K % 32 == 0. Split MX layouts (and checkpoints) hold whole 32-element blocks, one E8M0
    scale each; the paired scale layout then pads an odd K/32 itself. FP4 additionally needs K > 2
    (implied). torch_npu's own MX matmuls would accept a short last block, but there is no checkpoint
    layout for one, so lowbit does not quantize such layers (SGLang is stricter still: K % 64)."""
    if k % MX_BLOCK:
        return (
            f"K = {k} is not a multiple of {MX_BLOCK}: an MX block would straddle the end of every row "
            f"(K/32 = {k / MX_BLOCK:g}), and split MX layouts hold whole blocks only"
        )
    if fp4 and k < MIN_FP4_K:
        return f"K = {k}: FP4 matmuls reject K <= 2"
    return None
