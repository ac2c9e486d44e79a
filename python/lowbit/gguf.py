"""GGUF files for lowbit: open one (memory-mapped through the `gguf` package), list its tensors with
lowbit's types, and hand out lowbit-ready weights: a dense weight as uint8 [N, row_bytes], MoE
experts as [E, N, row_bytes] (and gate + up stacked into fused_moe's w13 [E, 2I, row_bytes]).

The bytes stay in the file's memory map until you move them (``.to(device)`` copies once); they
are read-only, so copy before writing into them. The `gguf` package is needed by this module only
(``pip install gguf``); lowbit's other modules do not import it.

    >>> f = lowbit.gguf.open_gguf("model.gguf")
    >>> for t in f.tensors(): print(t.name, t.type_name, t.shape, t.qtype)
    >>> w, q = f.weight("blk.0.attn_q.weight")            # uint8 [N, row_bytes], QuantType
    >>> y = lowbit.linear(x, w.to("cuda"), q)
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import torch

from ._types import GGUF_WEIGHT_TYPES, QuantType

_LOWBIT_IDS = {int(t): t for t in GGUF_WEIGHT_TYPES}


def _gguf_package() -> ModuleType:
    """The `gguf` package, imported on first use with a clear message when it is missing."""
    try:
        import gguf
    except ImportError as e:
        raise ImportError(
            "lowbit.gguf needs the `gguf` package to read GGUF files: pip install 'lowbit[gguf]' (or gguf==0.19.0)"
        ) from e
    return gguf


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a GGUF file. `shape` is in torch order (rows first: [N, K], experts [E, N, K])."""

    name: str
    ggml_type: int  # the file's ggml type id
    type_name: str  # ggml's name for it ("IQ4_XS", "F32", ...)
    shape: tuple[int, ...]
    qtype: QuantType | None  # lowbit's type, None when lowbit does not compute on it
    n_bytes: int

    @property
    def is_experts(self) -> bool:
        """A 3-D tensor: stacked MoE experts [E, N, K]."""
        return len(self.shape) == 3


class GGUFFile:
    """A GGUF file opened read-only and memory-mapped."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        gguf = _gguf_package()
        if not os.path.isfile(path):
            raise FileNotFoundError(f"path: no GGUF file at {os.fspath(path)!r}")
        self.path = os.fspath(path)
        self._reader: Any = gguf.GGUFReader(self.path, "r")
        self._by_name = {t.name: t for t in self._reader.tensors}

    def tensors(self) -> list[TensorInfo]:
        """Every tensor in file order."""
        return [self._info(t) for t in self._reader.tensors]

    def info(self, name: str) -> TensorInfo:
        return self._info(self._tensor(name))

    def tensor(self, name: str) -> torch.Tensor:
        """A tensor's data as stored, without a copy: uint8 [..., row_bytes] for quantized types,
        float32 / float16 for float tensors (read-only memory)."""
        t = self._tensor(name)
        data = np.asarray(t.data)
        with warnings.catch_warnings():
            # the memory map is read-only; torch warns that it cannot write into it
            warnings.simplefilter("ignore", UserWarning)
            return torch.from_numpy(data)

    def weight(self, name: str) -> tuple[torch.Tensor, QuantType]:
        """A 2-D quantized weight ready for lowbit.linear: (uint8 [N, row_bytes], its QuantType)."""
        info = self.info(name)
        if info.qtype is None:
            raise ValueError(f"name: tensor {name!r} has ggml type {info.type_name}, which lowbit does not compute on")
        if len(info.shape) != 2:
            raise ValueError(f"name: tensor {name!r} has shape {list(info.shape)}; a dense weight is 2-D [N, K]")
        return self.tensor(name), info.qtype

    def experts(self, name: str) -> tuple[torch.Tensor, QuantType]:
        """Stacked MoE experts (llama.cpp's *_exps tensors): (uint8 [E, N, row_bytes], QuantType)."""
        info = self.info(name)
        if info.qtype is None:
            raise ValueError(f"name: tensor {name!r} has ggml type {info.type_name}, which lowbit does not compute on")
        if not info.is_experts:
            raise ValueError(f"name: tensor {name!r} has shape {list(info.shape)}; experts are 3-D [E, N, K]")
        return self.tensor(name), info.qtype

    def moe_weights(self, gate: str, up: str, down: str) -> tuple[torch.Tensor, QuantType, torch.Tensor, QuantType]:
        """fused_moe's weights from a layer's gate, up and down experts: (w13 [E, 2I, row_bytes(H)],
        w13_type, w2 [E, H, row_bytes(I)], w2_type). w13 is a new tensor (gate rows, then up rows);
        w2 stays in the memory map."""
        g, gq = self.experts(gate)
        u, uq = self.experts(up)
        d, dq = self.experts(down)
        if gq != uq or g.shape != u.shape:
            raise ValueError(
                f"up: {up!r} ({uq.type_name}, {list(u.shape)}) must match gate {gate!r} "
                f"({gq.type_name}, {list(g.shape)})"
            )
        if d.shape[0] != g.shape[0]:
            raise ValueError(f"down: {down!r} holds {d.shape[0]} experts but gate {gate!r} holds {g.shape[0]}")
        return torch.cat([g, u], dim=1), gq, d, dq

    def _tensor(self, name: str) -> Any:
        t = self._by_name.get(name)
        if t is None:
            raise KeyError(f"name: no tensor {name!r} in {self.path}")
        return t

    @staticmethod
    def _info(t: Any) -> TensorInfo:
        ggml_type = int(t.tensor_type)
        shape = tuple(int(v) for v in reversed([int(s) for s in t.shape]))  # ggml lists the fastest dim first
        return TensorInfo(
            name=str(t.name),
            ggml_type=ggml_type,
            type_name=t.tensor_type.name,
            shape=shape,
            qtype=_LOWBIT_IDS.get(ggml_type),
            n_bytes=int(t.n_bytes),
        )


def open_gguf(path: str | os.PathLike[str]) -> GGUFFile:
    """Opens a GGUF file read-only (memory-mapped)."""
    return GGUFFile(path)


def write_gguf(
    path: str | os.PathLike[str], weights: Sequence[tuple[str, torch.Tensor, QuantType]], arch: str = "lowbit"
) -> None:
    """Writes quantized weights (uint8 [N, row_bytes] or [E, N, row_bytes] GGUF blocks) to a GGUF
    file with the `gguf` writer; for tests and the demo."""
    gguf = _gguf_package()
    writer = gguf.GGUFWriter(os.fspath(path), arch)
    for name, data, qtype in weights:
        if QuantType(qtype) not in GGUF_WEIGHT_TYPES:
            raise ValueError(f"weights: {name!r} has type {QuantType(qtype).type_name}, which is no GGUF type")
        raw = np.ascontiguousarray(data.detach().cpu().numpy())
        if raw.dtype != np.uint8:
            raise ValueError(f"weights: {name!r} must hold uint8 GGUF blocks, got {data.dtype}")
        writer.add_tensor(name, raw, raw_dtype=gguf.GGMLQuantizationType(int(qtype)))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def kernel_summary(info: TensorInfo, device: torch.device) -> str:
    """Which lowbit kernel a tensor would use on `device`: decode (1 token) and prefill (512)."""
    from ._api import select_kernel

    if info.qtype is None:
        return "-"
    if info.is_experts:
        return "fused_moe"
    if len(info.shape) != 2:
        return "-"
    n, k = info.shape
    decode = select_kernel(info.qtype, 1, n, k, device)["kernel"]
    prefill = select_kernel(info.qtype, 512, n, k, device)["kernel"]
    return decode if decode == prefill else f"{decode} (1 token) / {prefill} (512)"


__all__ = ["GGUFFile", "TensorInfo", "kernel_summary", "open_gguf", "write_gguf"]
