"""Fixtures of the Ascend backend tests: the torch_npu emulator installed as ``torch_npu``.

NPU tensors cannot exist on this machine. The emulated device is a marker: ``npu.to(t)`` returns t tagged
as an NPU tensor, and ``lowbit.ascend``'s device test is patched to recognise the tag, so lowbit's public
entry points dispatch to the backend for exactly those tensors while untagged CPU tensors still run
lowbit's CPU reference. The emulator's ops take and return CPU tensors and log every call.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass

import fake_torch_npu
import lowbit.ascend
import pytest
import torch
from fake_torch_npu import STATE, EmulatorState

_NPU_TAG = "_lowbit_emulated_npu"


def _is_emulated_npu(t: object) -> bool:
    return isinstance(t, torch.Tensor) and getattr(t, _NPU_TAG, False)


@dataclass
class EmulatedNpu:
    """Handle of the emulated device given to tests."""

    state: EmulatorState
    module: object

    @staticmethod
    def to(t: torch.Tensor) -> torch.Tensor:
        """t as an (emulated) NPU tensor: a new tensor object sharing t's data, tagged."""
        out = t.detach()
        setattr(out, _NPU_TAG, True)
        return out

    def ops(self) -> list[str]:
        return self.state.ops()

    def reset_log(self) -> None:
        self.state.calls.clear()


@pytest.fixture
def npu(monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatedNpu]:
    """torch_npu = the CPU emulator (fresh state, Ascend 950), NPU tensors = tagged CPU tensors."""
    STATE.reset()
    monkeypatch.setitem(sys.modules, "torch_npu", fake_torch_npu)
    monkeypatch.setattr(lowbit.ascend._device, "is_npu_tensor", _is_emulated_npu)
    lowbit.ascend.clear_cache()
    lowbit.ascend.set_e8m0_spelling("code")
    yield EmulatedNpu(STATE, fake_torch_npu)
    lowbit.ascend.set_e8m0_spelling("code")
    lowbit.ascend.clear_cache()
    STATE.reset()
