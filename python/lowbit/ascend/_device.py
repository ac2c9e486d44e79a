"""Where the backend's tensors live, and the lazy torch_npu import (never at ``import lowbit`` time)."""

from __future__ import annotations

import importlib
from types import ModuleType

import torch


def is_npu_tensor(t: object) -> bool:
    """True for a torch tensor on an Ascend NPU (device type "npu")."""
    return isinstance(t, torch.Tensor) and t.device.type == "npu"


def torch_npu() -> ModuleType:
    """The torch_npu module; raises RuntimeError with the reason when it cannot be imported."""
    try:
        return importlib.import_module("torch_npu")
    except Exception as e:  # torch_npu's import can fail in many ways (CANN libraries, drivers)
        raise RuntimeError(f"lowbit.ascend needs torch_npu, which could not be imported: {e}") from e
