"""The Ascend capability probe, the lazy torch_npu import, and lowbit's public entry points forwarding
NPU tensors to the backend."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import fake_torch_npu
import lowbit
import lowbit.ascend as ascend
import pytest
import torch
from ascend_helpers import ACT_FP8_BOUND, E4M3_REL, random_topk, rel_err
from lowbit import QuantType
from lowbit.ascend.probe import REQUIRED_OPS


def test_probe_without_torch_npu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch_npu", None)  # import torch_npu -> ImportError
    report = ascend.probe()
    assert report["available"] is False and report["torch_npu"] is None
    assert "torch_npu is not importable" in report["reason"]
    assert report["ops"] == {op: False for op in REQUIRED_OPS}
    assert report["verified_on_hardware"] is False
    assert set(report["quant_types"]) == {"mxfp8_e4m3", "mxfp4_split", "mxfp4"}


def test_probe_on_the_emulated_ascend_950(npu) -> None:
    report = ascend.probe()
    assert report["available"] is True and report["reason"] is None
    assert report["soc_name"] == "Ascend950PR" and report["soc_version"] == 260 and report["ascend_950"]
    assert report["torch_npu"] == fake_torch_npu.__version__ and report["device_count"] == 1
    assert all(report["ops"].values()) and set(report["ops"]) == set(REQUIRED_OPS)
    assert report["verified_on_hardware"] is False


def test_probe_rejects_other_socs_and_missing_ops(npu, monkeypatch: pytest.MonkeyPatch) -> None:
    npu.state.soc_version, npu.state.device_name = 250, "Ascend910_9391"  # an A3
    report = ascend.probe()
    assert report["available"] is False and not report["ascend_950"] and "need Ascend 950" in report["reason"]
    npu.state.soc_version, npu.state.device_name = 260, "Ascend950DT"
    monkeypatch.delattr(fake_torch_npu, "npu_grouped_matmul_swiglu_quant_v2")
    report = ascend.probe()
    assert report["available"] is False and report["ops"]["npu_grouped_matmul_swiglu_quant_v2"] is False
    assert "lacks npu_grouped_matmul_swiglu_quant_v2" in report["reason"]


def test_torch_npu_is_imported_lazily(tmp_path: Path) -> None:
    """import lowbit (and lowbit.ascend) must not import torch_npu; the probe imports it and survives
    its import failing."""
    trap = tmp_path / "torch_npu"
    trap.mkdir()
    (trap / "__init__.py").write_text('raise RuntimeError("torch_npu was imported")\n')
    script = textwrap.dedent(
        """
        import sys
        import lowbit, lowbit.ascend
        assert "torch_npu" not in sys.modules, "imported at import time"
        report = lowbit.ascend.probe()
        assert report["available"] is False and "torch_npu was imported" in report["reason"], report
        print("ok")
        """
    )
    # The trap comes first on the path, ahead of any real torch_npu; then the lowbit this test runs
    # (the checkout's python/ with its in-place build, or a pip-installed package).
    lowbit_parent = Path(lowbit.__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(lowbit_parent)])}
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_capabilities_report_the_npu_backend(npu) -> None:
    caps = lowbit.capabilities()
    assert "npu" in caps, "lowbit.capabilities() must carry lowbit.ascend.probe() under 'npu'"
    assert caps["npu"]["available"] is True and caps["npu"]["verified_on_hardware"] is False


def test_lowbit_entry_points_forward_npu_tensors(npu, trng) -> None:
    x = torch.randn(4, 64, generator=trng).to(torch.bfloat16)
    data, scales = lowbit.quantize(torch.randn(32, 64, generator=trng), QuantType.MXFP8_E4M3)
    y = lowbit.linear(npu.to(x), data, "mxfp8_e4m3", scales=scales)
    assert npu.ops() == ["npu_dynamic_mx_quant", "npu_quant_matmul"]
    assert rel_err(y, lowbit.linear(x.float(), data, "mxfp8_e4m3", scales=scales)) <= ACT_FP8_BOUND
    npu.reset_log()
    w13, s13 = lowbit.quantize(torch.randn(2, 128, 64, generator=trng) / 8, QuantType.MXFP8_E4M3)
    w2, s2 = lowbit.quantize(torch.randn(2, 64, 64, generator=trng) / 8, QuantType.MXFP8_E4M3)
    ids, weights = random_topk(4, 2, 1, trng)
    out = lowbit.fused_moe(
        npu.to(x), w13, w2, weights, ids, w13_type="mxfp8_e4m3", w2_type="mxfp8_e4m3", w13_scales=s13, w2_scales=s2
    )
    assert npu.ops()[0] == "npu_moe_init_routing_v2" and npu.ops()[-1] == "npu_moe_finalize_routing"
    ref = lowbit.fused_moe(
        x.float(), w13, w2, weights, ids, w13_type="mxfp8_e4m3", w2_type="mxfp8_e4m3", w13_scales=s13, w2_scales=s2
    )
    assert rel_err(out, ref) <= 2 * E4M3_REL
