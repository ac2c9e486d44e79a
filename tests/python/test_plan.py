"""The plan lowbit.select_kernel reports: the C++ planner's, for this machine or a device's facts."""

from __future__ import annotations

import lowbit
import pytest
import torch
from lowbit import _C

# An H200's facts: (major, minor, SMs, shared bytes per block (opt-in), per SM)
H200 = (9, 0, 132, 232448, 233472)


def test_cpu_plan_is_the_reference() -> None:
    plan = lowbit.select_kernel("iq4_xs", 4, 4096, 14336, "cpu")
    assert plan["kernel"] == "cpu_reference"
    assert plan["workspace_bytes"] == 0
    assert "no GPU" in plan["reason"]


@pytest.mark.parametrize(
    ("m", "kernel", "workspace"),
    [
        (1, "dp4a", 0),
        (3, "dp4a", 14336 + 3 * 14336),
        (8, "int8_tensor_cores", 14336 + 8 * 14336),
        (12, "bf16_tensor_cores", 0),
    ],
)
def test_h200_mmvq_plans(m: int, kernel: str, workspace: int) -> None:
    plan = _C.plan_linear(int(lowbit.QuantType.IQ4_XS), m, 4096, 14336, H200)
    assert plan["kernel"] == "mmvq"
    assert plan["passes"] == 1
    assert plan["mmvq"]["kernel"] == kernel
    assert plan["mmvq"]["tokens"] == m
    assert plan["workspace_bytes"] == workspace
    assert kernel in plan["describe"]


def test_h200_passes_dequant_and_forced_kernels() -> None:
    q = int(lowbit.QuantType.IQ2_S)
    two = _C.plan_linear(q, 20, 4096, 14336, H200)
    assert (two["passes"], two["mmvq"]["tokens"], two["mmvq_last"]["tokens"]) == (2, 16, 4)
    big = _C.plan_linear(q, 33, 4096, 14336, H200)
    assert big["kernel"] == "dequant_matmul"
    assert big["workspace_bytes"] == 4096 * 14336 * 2
    forced = _C.plan_linear(q, 4, 4096, 14336, H200, kernel="mmvq", math="bf16")
    assert forced["mmvq"]["kernel"] == "bf16_tensor_cores"
    assert "forced" in forced["reason"]
    with pytest.raises(ValueError, match="kernel: mmq needs a compute capability 9.0 GPU"):
        _C.plan_linear(q, 64, 4096, 14336, H200, kernel="mmq")
    with pytest.raises(ValueError, match="math"):
        _C.plan_linear(q, 4, 4096, 14336, H200, math="fp4")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_select_kernel_reports_the_devices_plan() -> None:
    dev = torch.device("cuda")
    plan = lowbit.select_kernel("iq4_xs", 2, 4096, 14336, dev)
    assert plan["kernel"] == "mmvq"
    assert plan["mmvq_kernel"] == plan["mmvq"]["kernel"]
