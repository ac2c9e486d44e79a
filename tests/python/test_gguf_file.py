"""lowbit.gguf on small GGUF files written in the test: listing, dense and MoE weights straight from
the memory map, the gguf-info and demo commands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import lowbit
import numpy as np
import pytest
import torch
from _helpers import random_weight, rel_err
from lowbit import QuantType

gguf = pytest.importorskip("gguf")
from lowbit.gguf import open_gguf, write_gguf  # noqa: E402

PYTHON_DIR = str(Path(lowbit.__file__).resolve().parent.parent)


@pytest.fixture
def model(tmp_path: Path, rng: np.random.Generator) -> tuple[Path, dict[str, torch.Tensor]]:
    """A file with a dense weight per family, stacked experts of one MoE layer and a float tensor."""
    tensors = {
        "blk.0.attn_q.weight": random_weight(QuantType.IQ4_XS, 40, 768, rng)[0],
        "blk.0.attn_k.weight": random_weight(QuantType.IQ2_S, 24, 512, rng)[0],
        "blk.0.attn_v.weight": random_weight(QuantType.Q5_0, 24, 416, rng)[0],
        "blk.0.ffn_gate_exps.weight": random_weight(QuantType.IQ3_S, 64, 256, rng, experts=3)[0],
        "blk.0.ffn_up_exps.weight": random_weight(QuantType.IQ3_S, 64, 256, rng, experts=3)[0],
        "blk.0.ffn_down_exps.weight": random_weight(QuantType.Q8_0, 256, 64, rng, experts=3)[0],
    }
    types = {
        "blk.0.attn_q.weight": QuantType.IQ4_XS,
        "blk.0.attn_k.weight": QuantType.IQ2_S,
        "blk.0.attn_v.weight": QuantType.Q5_0,
        "blk.0.ffn_gate_exps.weight": QuantType.IQ3_S,
        "blk.0.ffn_up_exps.weight": QuantType.IQ3_S,
        "blk.0.ffn_down_exps.weight": QuantType.Q8_0,
    }
    path = tmp_path / "model.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    for name, data in tensors.items():
        writer.add_tensor(name, data.numpy(), raw_dtype=gguf.GGMLQuantizationType(int(types[name])))
    norm = rng.standard_normal(768).astype(np.float32)
    writer.add_tensor("blk.0.attn_norm.weight", norm)
    writer.add_tensor("token_embd.weight", rng.standard_normal((10, 64)).astype(np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path, tensors


def test_lists_tensors_with_lowbit_types(model: tuple[Path, dict[str, torch.Tensor]]) -> None:
    path, _ = model
    infos = {t.name: t for t in open_gguf(path).tensors()}
    assert len(infos) == 8
    q = infos["blk.0.attn_q.weight"]
    assert (q.qtype, q.type_name, q.shape, q.ggml_type) == (QuantType.IQ4_XS, "IQ4_XS", (40, 768), 23)
    gate = infos["blk.0.ffn_gate_exps.weight"]
    assert gate.shape == (3, 64, 256) and gate.is_experts and gate.qtype is QuantType.IQ3_S
    assert infos["blk.0.attn_norm.weight"].qtype is None and infos["blk.0.attn_norm.weight"].shape == (768,)
    assert infos["token_embd.weight"].type_name == "F16" and infos["token_embd.weight"].shape == (10, 64)


def test_dense_weights_are_the_file_bytes_without_a_copy(
    model: tuple[Path, dict[str, torch.Tensor]], rng: np.random.Generator
) -> None:
    path, tensors = model
    f = open_gguf(path)
    for name in ("blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"):
        w, q = f.weight(name)
        assert w.dtype == torch.uint8 and torch.equal(w, tensors[name])
        x = torch.from_numpy(rng.standard_normal((3, f.info(name).shape[1])).astype(np.float32))
        ref = x.double() @ lowbit.dequantize(tensors[name], q).double().T
        assert rel_err(lowbit.linear(x, w, q), ref) < 1e-5
    # the same memory as the map: two reads share storage
    a, _ = f.weight("blk.0.attn_q.weight")
    b, _ = f.weight("blk.0.attn_q.weight")
    assert a.data_ptr() == b.data_ptr()


def test_moe_weights_feed_fused_moe(model: tuple[Path, dict[str, torch.Tensor]], rng: np.random.Generator) -> None:
    path, tensors = model
    w13, w13_type, w2, w2_type = open_gguf(path).moe_weights(
        "blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.weight", "blk.0.ffn_down_exps.weight"
    )
    assert w13.shape == (3, 128, tensors["blk.0.ffn_gate_exps.weight"].shape[-1]) and w13_type is QuantType.IQ3_S
    assert torch.equal(w13[:, :64], tensors["blk.0.ffn_gate_exps.weight"])
    assert torch.equal(w13[:, 64:], tensors["blk.0.ffn_up_exps.weight"])
    assert w2_type is QuantType.Q8_0 and torch.equal(w2, tensors["blk.0.ffn_down_exps.weight"])
    x = torch.from_numpy(rng.standard_normal((4, 256)).astype(np.float32))
    ids = torch.from_numpy(rng.integers(0, 3, (4, 2)))
    weights = torch.rand(4, 2)
    out = lowbit.fused_moe(x, w13, w2, weights, ids, w13_type=w13_type, w2_type=w2_type)
    # reference: decode each expert and compute the layer in float64
    g = lowbit.dequantize(tensors["blk.0.ffn_gate_exps.weight"], w13_type).double()
    u = lowbit.dequantize(tensors["blk.0.ffn_up_exps.weight"], w13_type).double()
    d = lowbit.dequantize(tensors["blk.0.ffn_down_exps.weight"], w2_type).double()
    ref = torch.zeros(4, 256, dtype=torch.float64)
    for t in range(4):
        for j in range(2):
            e = int(ids[t, j])
            h = torch.nn.functional.silu(g[e] @ x[t].double()) * (u[e] @ x[t].double())
            ref[t] += float(weights[t, j]) * (d[e] @ h)
    assert rel_err(out, ref) < 1e-5


def test_wrong_requests_name_the_argument(model: tuple[Path, dict[str, torch.Tensor]], tmp_path: Path) -> None:
    path, _ = model
    f = open_gguf(path)
    with pytest.raises(ValueError, match=r"name: tensor 'blk.0.attn_norm.weight' has ggml type F32"):
        f.weight("blk.0.attn_norm.weight")
    with pytest.raises(ValueError, match=r"a dense weight is 2-D"):
        f.weight("blk.0.ffn_gate_exps.weight")
    with pytest.raises(ValueError, match=r"experts are 3-D"):
        f.experts("blk.0.attn_q.weight")
    with pytest.raises(KeyError, match=r"name: no tensor 'nope'"):
        f.weight("nope")
    with pytest.raises(ValueError, match=r"up: .* must match gate"):
        f.moe_weights("blk.0.ffn_gate_exps.weight", "blk.0.ffn_down_exps.weight", "blk.0.ffn_down_exps.weight")
    with pytest.raises(FileNotFoundError, match=r"path: no GGUF file"):
        open_gguf(tmp_path / "missing.gguf")


def test_missing_gguf_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "gguf", None)  # import gguf now raises ImportError
    with pytest.raises(ImportError, match=r"lowbit.gguf needs the `gguf` package"):
        open_gguf(tmp_path / "any.gguf")


def test_write_gguf_round_trips(tmp_path: Path, rng: np.random.Generator) -> None:
    w, _ = random_weight(QuantType.IQ1_M, 7, 512, rng)
    experts, _ = random_weight(QuantType.MXFP4, 5, 64, rng, experts=2)
    path = tmp_path / "w.gguf"
    write_gguf(path, [("a", w, QuantType.IQ1_M), ("b", experts, QuantType.MXFP4)])
    f = open_gguf(path)
    assert torch.equal(f.weight("a")[0], w) and torch.equal(f.experts("b")[0], experts)
    with pytest.raises(ValueError, match=r"weights: 'c' has type mxfp8_e4m3, which is no GGUF type"):
        write_gguf(tmp_path / "x.gguf", [("c", w, QuantType.MXFP8_E4M3)])


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    # the checkout's python/ first, then whatever the caller's path holds (the gguf package may live there)
    inherited = os.environ.get("PYTHONPATH")
    env = {"PYTHONPATH": PYTHON_DIR + (os.pathsep + inherited if inherited else ""), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "lowbit", *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def test_gguf_info_prints_names_types_shapes_and_kernels(model: tuple[Path, dict[str, torch.Tensor]]) -> None:
    path, _ = model
    r = run_cli("gguf-info", str(path), "--device", "cpu")
    assert r.returncode == 0, r.stderr
    lines = {line.split()[0]: line for line in r.stdout.splitlines()[2:]}
    assert lines["blk.0.attn_q.weight"].split()[1:] == ["IQ4_XS", "40", "x", "768", "iq4_xs", "cpu_reference"]
    assert lines["blk.0.ffn_gate_exps.weight"].split()[-2:] == ["iq3_s", "fused_moe"]
    assert lines["blk.0.attn_norm.weight"].split()[-2:] == ["-", "-"]


def test_demo_runs_on_a_given_file_and_on_one_it_writes(model: tuple[Path, dict[str, torch.Tensor]]) -> None:
    path, _ = model
    r = run_cli("demo", str(path), "--cpu", "--reps", "1")
    assert r.returncode == 0, r.stderr
    assert "blk.0.attn_q.weight" in r.stdout and "iq4_xs" in r.stdout and "(OK)" in r.stdout
    r = run_cli("demo", "--cpu", "--reps", "1", "--n", "64", "--k", "512")
    assert r.returncode == 0, r.stderr
    assert "with the gguf writer" in r.stdout and "demo.iq2_xxs.weight" in r.stdout and "(OK)" in r.stdout
