"""Capabilities report the build and every type; the Python enum mirrors the C++ type table."""

from __future__ import annotations

import lowbit
import torch
from lowbit import _C, QuantType


def test_python_enum_mirrors_cpp_types() -> None:
    cpp = {t["id"]: t for t in _C.types()}
    assert set(cpp) == {int(t) for t in QuantType}
    for t in QuantType:
        assert cpp[int(t)]["name"] == t.type_name
        assert cpp[int(t)]["is_weight"] == (t in lowbit.WEIGHT_TYPES)


def test_capabilities_report_every_type_and_build_facts() -> None:
    caps = lowbit.capabilities()
    assert caps["build"]["version"] == lowbit.__version__
    assert caps["build"]["torch_version"] == torch.__version__
    assert set(caps["types"]) == {t.type_name for t in QuantType}
    iq2 = caps["types"]["iq2_xxs"]
    assert iq2["id"] == 16 and iq2["block_bytes"] == 66 and iq2["kernels"]["cpu_reference"]
    assert abs(iq2["bits_per_weight"] - 2.0625) < 1e-12
    assert caps["types"]["mxfp8_e4m3"]["bits_per_weight"] == 8.25
    assert caps["types"]["q8_1"]["kernels"]["cpu_reference"] is False
    assert caps["types"]["mxfp4_split"]["kernels"]["cpu_quantize"] is True
    compiled = caps["build"]["cuda_compiled"]
    for name, t in caps["types"].items():
        k = t["kernels"]
        # dequantize, MMVQ and the MoE kernels exist for every weight type exactly when the build has
        # CUDA; MMQ where the build holds sm_90a code
        weight_kernels = compiled and t["is_weight"]
        assert k["cuda_dequant"] == k["cuda_mmvq"] == weight_kernels, name
        assert k["cuda_moe_vec"] == k["cuda_moe_batched"] == weight_kernels, name
        assert k["cuda_mmq"] == (weight_kernels and "90a" in caps["build"]["cuda_archs"].split(",")), name
    assert len(caps["cuda_devices"]) == (torch.cuda.device_count() if compiled else 0)
    assert caps["npu"]["verified_on_hardware"] is False


def test_usable_kernels_need_a_device_the_build_runs_on() -> None:
    caps = lowbit.capabilities()
    build = caps["build"]
    runs_here = any(d["runs_kernels"] for d in caps["cuda_devices"])
    expected = build["cuda_compiled"] and runs_here and build["torch_ops_cuda"] and torch.cuda.is_available()
    assert build["cuda_usable"] is expected
    assert build["torch_ops_cuda"] == (build["cuda_compiled"] and torch.version.cuda is not None)
    for name, t in caps["types"].items():
        compiled, usable = t["kernels"], t["usable"]
        assert set(usable) == set(compiled), name
        for kernel, ok in usable.items():
            # usable implies compiled; the CPU kernels are usable wherever they are compiled
            assert not ok or compiled[kernel], (name, kernel)
            if kernel.startswith("cpu_"):
                assert ok == compiled[kernel], (name, kernel)
            else:
                assert ok == (compiled[kernel] and expected), (name, kernel)
    if not torch.cuda.is_available():
        assert not any(v for t in caps["types"].values() for k, v in t["usable"].items() if k.startswith("cuda_"))
