"""FRACTAL_NZ storage and the emulated per-storage format tag (ascend-npu-ops.md section 5).

A real NZ tensor keeps its logical ND shape while its storage is tiled; views of it (the transpose the
callers apply afterwards) share that storage. The emulator keeps the logical values in an ordinary CPU
tensor and tags its *storage* as NZ, so every view of it (transpose, dtype view) reports format 29,
while anything that copies (``.contiguous()`` of a transpose, ``.clone()``) is ND again.
The tiled image is computed too, so the tile rule itself can be checked.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

FORMAT_ND = 2
FORMAT_NZ = 29
# torch_npu/npu/_format.py (Ascend/pytorch @9e73e708): the C0 variants CANN reports as the actual format.
FORMAT_NZ_C0_16 = 50
FORMAT_NZ_C0_32 = 51
NZ_FORMATS = (FORMAT_NZ, FORMAT_NZ_C0_16)
BLOCK_ROWS = 16  # BLOCKSIZE
BLOCK_BYTES = 32  # BLOCKBYTES


@dataclass
class NzStorage:
    base: torch.Tensor  # the logical [..., R, C] tensor the cast returned (kept alive: its pointer is the key)
    tiles: torch.Tensor  # the tiled image [..., ceil(C/C0), ceil(R/16), 16, C0]
    c0: int
    customize_dtype: str | None
    input_dtype: str | None
    npu_format: int = FORMAT_NZ


def c0_for(itemsize: int) -> int:
    """Columns per tile: 32 bytes / itemsize; fp32 is tiled as fp16 (C0 = 16)."""
    return BLOCK_BYTES // min(itemsize, 2)


def nd_to_nz(t: torch.Tensor, c0: int) -> torch.Tensor:
    """[..., R, C] -> [..., ceil(C/c0), ceil(R/16), 16, c0]; element (r, c) -> [c // c0, r // 16, r % 16, c % c0],
    padding 0."""
    rows, cols = t.shape[-2], t.shape[-1]
    row_tiles, col_tiles = -(-rows // BLOCK_ROWS), -(-cols // c0)
    padded = torch.zeros(*t.shape[:-2], row_tiles * BLOCK_ROWS, col_tiles * c0, dtype=t.dtype)
    padded[..., :rows, :cols] = t
    tiled = padded.reshape(*t.shape[:-2], row_tiles, BLOCK_ROWS, col_tiles, c0)
    return tiled.transpose(-4, -2).transpose(-3, -2).contiguous()


def nz_to_nd(tiles: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """Inverse of nd_to_nz."""
    col_tiles, row_tiles, _, c0 = tiles.shape[-4:]
    t = tiles.transpose(-3, -2).transpose(-4, -2)  # [..., row_tiles, 16, col_tiles, c0]
    t = t.reshape(*tiles.shape[:-4], row_tiles * BLOCK_ROWS, col_tiles * c0)
    return t[..., :rows, :cols].contiguous()


def covers_its_storage(t: torch.Tensor) -> bool:
    """True when t is a plain dense tensor over its whole storage (a dtype view counts as one).

    torch_npu's format cast skips view / non-contiguous sources (IsViewTensor); the emulator reads
    "view" as anything that is not contiguous, starts at an offset, or covers only part of its storage.
    """
    return (
        t.is_contiguous() and t.storage_offset() == 0 and t.numel() * t.element_size() == t.untyped_storage().nbytes()
    )


def is_transpose_of_contiguous(t: torch.Tensor) -> bool:
    """The op-side test for a transposed weight (is_transpose_last_two_dims): the last two dims of t
    are a transpose view of a contiguous tensor."""
    if t.dim() < 2:
        return False
    rows, cols = t.shape[-2], t.shape[-1]
    if rows == 1 or cols == 1:
        return False
    return t.stride(-2) == 1 and t.stride(-1) == rows and t.transpose(-1, -2).is_contiguous()
