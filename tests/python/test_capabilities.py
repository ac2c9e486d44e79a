"""Capabilities report the build and every type; the Python enum mirrors the C++ type table."""

from __future__ import annotations

import torch

import lowbit
from lowbit import QuantType, _C


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
    if not torch.cuda.is_available():
        assert all(not v for t in caps["types"].values() for k, v in t["kernels"].items() if k.startswith("cuda_") and not caps["build"]["cuda_compiled"])
