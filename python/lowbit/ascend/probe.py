"""What the Ascend backend can do on this machine: torch_npu, the SoC, and the torch_npu ops it calls.

Reported by ``lowbit.capabilities()["npu"]``. Works (and says why not) when torch_npu is absent.
"""

from __future__ import annotations

import importlib
from typing import Any

# Every torch_npu function the backend calls.
REQUIRED_OPS: tuple[str, ...] = (
    "npu_dynamic_mx_quant",
    "npu_dynamic_dual_level_mx_quant",
    "npu_quant_matmul",
    "npu_dual_level_quant_matmul",
    "npu_format_cast",
    "npu_moe_init_routing_v2",
    "npu_grouped_matmul",
    "npu_grouped_matmul_swiglu_quant_v2",
    "npu_moe_finalize_routing",
)

# vllm-ascend's SoC table: torch_npu.npu.get_soc_version() == 260 is Ascend 950 (A5); the MX ops exist there only.
ASCEND_950_SOC_VERSIONS: frozenset[int] = frozenset({260})

SCHEMES: tuple[str, ...] = ("w8a8_mxfp8", "w4a4_mxfp4", "w4a4_mxfp4_dual", "w4a8_mxfp4")
QUANT_TYPES: tuple[str, ...] = ("mxfp8_e4m3", "mxfp4_split", "mxfp4")


def _is_ascend_950(name: str | None, soc_version: int | None) -> bool:
    if soc_version in ASCEND_950_SOC_VERSIONS:
        return True
    return bool(name) and name.replace(" ", "").lower().startswith("ascend950")


def probe() -> dict[str, Any]:
    """A report of the Ascend backend on this machine.

    Keys: ``available`` (the backend can run MX layers here), ``reason`` (why not, else None),
    ``torch_npu`` (its version or None), ``device_count``, ``soc_name``, ``soc_version``, ``ascend_950``,
    ``ops`` (each required torch_npu op: present or not), ``schemes`` and ``quant_types`` covered,
    ``verified_on_hardware`` (False: the backend is tested against a CPU emulation of torch_npu only).
    """
    report: dict[str, Any] = {
        "available": False,
        "reason": None,
        "torch_npu": None,
        "device_count": 0,
        "soc_name": None,
        "soc_version": None,
        "ascend_950": False,
        "ops": {op: False for op in REQUIRED_OPS},
        "schemes": list(SCHEMES),
        "quant_types": list(QUANT_TYPES),
        "verified_on_hardware": False,
    }
    try:
        torch_npu = importlib.import_module("torch_npu")
    except Exception as e:  # ImportError, or a CANN / driver failure inside torch_npu's import
        report["reason"] = f"torch_npu is not importable: {type(e).__name__}: {e}"
        return report
    report["torch_npu"] = str(getattr(torch_npu, "__version__", "unknown"))
    report["ops"] = {op: callable(getattr(torch_npu, op, None)) for op in REQUIRED_OPS}
    npu = getattr(torch_npu, "npu", None)
    try:
        report["device_count"] = int(npu.device_count()) if npu is not None and npu.is_available() else 0
    except Exception as e:
        report["reason"] = f"torch_npu could not query devices: {type(e).__name__}: {e}"
        return report
    if report["device_count"] == 0:
        report["reason"] = "torch_npu is installed but no NPU device is available"
        return report
    try:
        report["soc_name"] = str(npu.get_device_name(0))
    except Exception:
        report["soc_name"] = None
    try:
        report["soc_version"] = int(npu.get_soc_version())
    except Exception:
        report["soc_version"] = None
    report["ascend_950"] = _is_ascend_950(report["soc_name"], report["soc_version"])
    missing = [op for op, present in report["ops"].items() if not present]
    if not report["ascend_950"]:
        report["reason"] = (
            f"the MX ops need Ascend 950 (A5); this device is {report['soc_name']!r} "
            f"(soc_version {report['soc_version']})"
        )
    elif missing:
        report["reason"] = f"this torch_npu lacks {', '.join(missing)}"
    else:
        report["available"] = True
    return report
