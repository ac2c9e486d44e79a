"""The emulated device: its SoC, its selectable uncertain behaviours, the NZ format tags and the log
of every op call (so tests can assert the sequence and the argument contracts)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ._nz import FORMAT_ND, NzStorage


@dataclass
class TensorInfo:
    """What a test needs to know about a tensor argument at the moment of the call."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    stride: tuple[int, ...]
    contiguous: bool
    npu_format: int
    storage_ptr: int

    @property
    def transposed(self) -> bool:
        """Last two dims are a transpose view of contiguous storage."""
        if len(self.shape) < 2:
            return False
        rows = self.shape[-2]
        return self.stride[-2] == 1 and self.stride[-1] == rows and not self.contiguous


@dataclass
class Call:
    op: str
    args: dict[str, Any]  # the arguments as passed (tensors by reference)
    info: dict[str, Any]  # TensorInfo (or a list of them) for every tensor argument, taken at call time
    outputs: Any = None

    def __getitem__(self, name: str) -> Any:
        return self.args[name]


@dataclass
class EmulatorState:
    soc_version: int = 260  # vllm-ascend's soc table: 260 = Ascend 950 (A5); 220-225 A2, 250-255 A3

    @property
    def ascend_950(self) -> bool:
        return self.soc_version >= 260

    device_name: str = "Ascend950PR"
    # ascend-npu-ops.md section 2 [M]: which scale rule init-routing's MXFP8 modes use. "round_scale"
    # (master, OP commit 721697d1 onwards) or "ocp_floor" (26.1.0 docs and golden).
    init_routing_scale_rule: str = "round_scale"
    # Section 3b [L]: the exponent rule of swiglu_quant_v2's MX requant; the doc says assume OCP floor.
    swiglu_requant_scale_rule: str = "ocp_floor"
    # Which op-plugin branch's npu_grouped_matmul_swiglu_quant_v2 to emulate: "master" (@517f2e7d) or
    # "26.0.0" (@6ffd6e22), whose ``static const bool mxfp4_input`` keeps the first call's answer.
    op_plugin_branch: str = "master"
    gmm_swiglu_mxfp4_input_latched: bool | None = None
    calls: list[Call] = field(default_factory=list)
    nz_storages: dict[int, NzStorage] = field(default_factory=dict)

    def reset(self) -> None:
        self.__init__()

    # ---- formats --------------------------------------------------------------------------------
    def format_of(self, t: torch.Tensor) -> int:
        record = self.nz_record(t)
        return FORMAT_ND if record is None else record.npu_format

    def nz_record(self, t: torch.Tensor) -> NzStorage | None:
        return self.nz_storages.get(t.untyped_storage().data_ptr()) if t.numel() else None

    # ---- call log -------------------------------------------------------------------------------
    def describe(self, t: torch.Tensor) -> TensorInfo:
        return TensorInfo(
            shape=tuple(t.shape),
            dtype=t.dtype,
            stride=tuple(t.stride()),
            contiguous=t.is_contiguous(),
            npu_format=self.format_of(t),
            storage_ptr=t.untyped_storage().data_ptr() if t.numel() else 0,
        )

    def record(self, op: str, args: dict[str, Any]) -> Call:
        info: dict[str, Any] = {}
        for name, value in args.items():
            if isinstance(value, torch.Tensor):
                info[name] = self.describe(value)
            elif isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
                info[name] = [self.describe(v) for v in value]
        call = Call(op, dict(args), info)
        self.calls.append(call)
        return call

    def ops(self) -> list[str]:
        """Names of the ops called so far, in order."""
        return [c.op for c in self.calls]

    def last(self, op: str) -> Call:
        for call in reversed(self.calls):
            if call.op == op:
                return call
        raise AssertionError(f"{op} was never called; calls: {self.ops()}")

    def all(self, op: str) -> list[Call]:
        return [c for c in self.calls if c.op == op]


STATE = EmulatorState()
