"""MMQ (the Hopper tiled GEMM on the quantized weight) against references: every weight type,
tails of M, N and K, every activation dtype, split K, CUDA-graph replay, determinism, a weight of
more than 2^31 elements. Skipped with the reason where no sm_90 GPU (or no sm_90a build) exists.

Two references: float64 on the decoded weight (end to end), and the exact result on the weights and
activations as the kernel rounds them (tests/python/_kernel_arithmetic.py: each weight the bf16
rounding of its magnitude times the bf16 scale, activations rounded to bf16, as the bf16 MMVQ),
which the kernel's float32 sums meet to about 1e-6 of the norm."""

from __future__ import annotations

import lowbit
import numpy as np
import pytest
import torch
from _helpers import BLOCK, fresh_seed, random_weight, rel_err
from _kernel_arithmetic import (
    assert_rounded_result,
    bf16_activations,
    kernel_bf16_weights,
    q8_activations,
    record_error,
)
from lowbit import QuantType


def _mmq_usable() -> tuple[bool, str]:
    if not torch.cuda.is_available():
        return False, "needs a CUDA device"
    if torch.cuda.get_device_capability() != (9, 0):
        return False, "MMQ's wgmma kernels need a compute capability 9.0 GPU"
    if not lowbit.capabilities()["types"]["iq4_xs"]["kernels"]["cuda_mmq"]:
        return False, "this build has no sm_90a MMQ kernels (LOWBIT_CUDA_ARCHS without 90a)"
    return True, ""


_OK, _WHY = _mmq_usable()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _OK, reason=_WHY or "n/a")]

DTYPES = (torch.bfloat16, torch.float16, torch.float32)
# float64 end to end: weights and activations rounded to bf16 (relative 2^-9 each), float32 sums
FLOAT64_BOUND = 1e-2
# against the exact result of the kernel's own roundings: float32 sums (tensor cores truncate)
EXACT_BOUND = 3e-5
ACCUMULATE_TOL = 1e-4  # bf16 / fp16 outputs: half an ulp plus this share of the rms for the sums
# math="int8": the types whose int8 form scales 32 weights at a time (the set is pinned in
# test_errors.py::test_mmq_arithmetic_is_checked)
INT8_TYPES = tuple(q for q in lowbit.WEIGHT_TYPES if lowbit._C.mmq_int8_supported(int(q)))
# float64 end to end: activations quantized to int8 per 32 values (the int8 MMVQ's bound)
INT8_FLOAT64_BOUND = 3e-2
# against the exact product of the int8 codes with their scales: float32 scaling and sums only
INT8_EXACT_BOUND = 2e-5


def _k_for(qtype: QuantType, want: int) -> int:
    elems, _ = BLOCK[qtype]
    return max(elems, want // elems * elems)


def _exact(x: torch.Tensor, w: torch.Tensor, qtype: QuantType, scales: torch.Tensor | None) -> torch.Tensor:
    """float64 [M, N]: the activations and weights rounded as the kernel rounds them, summed exactly."""
    wb = kernel_bf16_weights(qtype, w.cpu(), None if scales is None else scales.cpu())
    return bf16_activations(x.cpu()) @ wb.T


@pytest.mark.parametrize("qtype", lowbit.WEIGHT_TYPES, ids=lambda q: q.type_name)
@pytest.mark.parametrize("m,n,k_want", [(9, 200, 800), (17, 328, 1280), (127, 136, 2048), (129, 257, 4352)])
def test_mmq_matches_references(qtype: QuantType, m: int, n: int, k_want: int) -> None:
    rng = np.random.default_rng(fresh_seed())
    k = _k_for(qtype, k_want)
    dev = torch.device("cuda")
    w, s = random_weight(qtype, n, k, rng, device=dev)
    x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    y = torch.ops.lowbit.mmq(x, w, int(qtype), scales=s, math="bf16")
    assert y.shape == (m, n) and y.dtype == torch.bfloat16
    assert torch.isfinite(y).all()
    ref64 = x.double() @ lowbit.dequantize(w, qtype, scales=s).double().T
    assert rel_err(y, ref64) < FLOAT64_BOUND
    exact = _exact(x, w, qtype, s)
    what = f"{qtype.type_name} M={m} N={n} K={k}"
    assert_rounded_result(y, exact, ACCUMULATE_TOL, what)
    # float32 activations (rounded to bf16 by the kernel alike) give a float32 output to compare tightly
    yf = torch.ops.lowbit.mmq(x.float(), w, int(qtype), scales=s, math="bf16")
    assert yf.dtype == torch.float32
    err = rel_err(yf, exact)
    record_error("bf16_mmq_exact", what, err)
    assert err < EXACT_BOUND, f"{what}: rel err {err:.3g}"


@pytest.mark.parametrize("qtype", INT8_TYPES, ids=lambda q: q.type_name)
@pytest.mark.parametrize("m,n,k_want", [(9, 200, 800), (33, 328, 1280), (64, 136, 2048), (129, 257, 4352)])
def test_mmq_int8_matches_its_arithmetic(qtype: QuantType, m: int, n: int, k_want: int) -> None:
    """math="int8": the weights' int8 codes times the activations quantized per token and 32 weights
    (q8_activations emulates the prologue), each 32-weight product scaled into float32. Tails of M
    (tiles of 16 / 64 tokens), N and K; M = 129 splits K (the partial sums after the int8 units)."""
    rng = np.random.default_rng(fresh_seed())
    k = _k_for(qtype, k_want)
    dev = torch.device("cuda")
    w, s = random_weight(qtype, n, k, rng, device=dev)
    wf = lowbit.dequantize(w, qtype, scales=s).double().cpu()
    x = torch.randn(m, k, device=dev, dtype=torch.float32)
    what = f"{qtype.type_name} M={m} N={n} K={k}"
    y = torch.ops.lowbit.mmq(x, w, int(qtype), scales=s, math="int8")
    assert y.shape == (m, n) and y.dtype == torch.float32
    exact = q8_activations(x) @ wf.T
    err = rel_err(y, exact)
    record_error("int8_mmq_exact", what, err)
    assert err < INT8_EXACT_BOUND, f"{what}: rel err {err:.3g}"
    assert rel_err(y, x.double() @ wf.to(dev).T) < INT8_FLOAT64_BOUND
    assert torch.equal(y, torch.ops.lowbit.mmq(x, w, int(qtype), scales=s, math="int8")), f"{what}: not deterministic"
    # bf16 activations: the output in bf16, rounded once from the float32 sums
    xb = x.to(torch.bfloat16)
    yb = torch.ops.lowbit.mmq(xb, w, int(qtype), scales=s, math="int8")
    assert yb.dtype == torch.bfloat16
    assert_rounded_result(yb, q8_activations(xb) @ wf.T, ACCUMULATE_TOL, what + " bf16")


@pytest.mark.parametrize("qtype", [QuantType.IQ1_M, QuantType.IQ2_XS, QuantType.IQ2_S, QuantType.MXFP8_E4M3])
def test_mmq_int8_names_the_types_it_serves(qtype: QuantType) -> None:
    w, s = random_weight(qtype, 64, 512, np.random.default_rng(fresh_seed()), device=torch.device("cuda"))
    with pytest.raises(ValueError, match='math: "int8" MMQ needs a type whose int8 form scales 32 weights'):
        torch.ops.lowbit.mmq(torch.randn(32, 512, device="cuda"), w, int(qtype), scales=s, math="int8")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "qtype", [QuantType.IQ4_XS, QuantType.IQ2_XXS, QuantType.MXFP8_E4M3], ids=lambda q: q.type_name
)
def test_mmq_activation_dtypes_and_leading_dims(dtype: torch.dtype, qtype: QuantType) -> None:
    rng = np.random.default_rng(fresh_seed())
    n, k = 264, _k_for(qtype, 1024)
    w, s = random_weight(qtype, n, k, rng, device=torch.device("cuda"))
    x = torch.randn(3, 37, k, device="cuda", dtype=dtype)
    y = torch.ops.lowbit.mmq(x, w, int(qtype), scales=s)
    assert y.shape == (3, 37, n) and y.dtype == dtype
    ref = x.double().reshape(-1, k) @ lowbit.dequantize(w, qtype, scales=s).double().T
    assert rel_err(y.reshape(-1, n), ref) < FLOAT64_BOUND


@pytest.mark.parametrize("m", [1, 9, 64, 65, 1000])
def test_mmq_split_k_and_token_tiles(m: int) -> None:
    """Few output tiles over a long K: the configuration splits K, the splits' sums meet in order."""
    rng = np.random.default_rng(fresh_seed())
    q = QuantType.IQ3_S
    n, k = 130, 8192
    w, s = random_weight(q, n, k, rng, device=torch.device("cuda"))
    x = torch.randn(m, k, device="cuda", dtype=torch.float32)
    y = torch.ops.lowbit.mmq(x, w, int(q), scales=s, math="bf16")
    err = rel_err(y, _exact(x, w, q, s))
    record_error("bf16_mmq_exact", f"split K M={m}", err)
    assert err < EXACT_BOUND, f"M={m}: rel err {err:.3g}"
    ref64 = x.double() @ lowbit.dequantize(w, q, scales=s).double().T
    assert rel_err(y, ref64) < FLOAT64_BOUND


def test_mmq_is_deterministic_and_graph_replay_equals_eager() -> None:
    rng = np.random.default_rng(fresh_seed())
    q = QuantType.IQ4_NL
    n, k, m = 1000, 4096, 200
    w, s = random_weight(q, n, k, rng, device=torch.device("cuda"))
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    eager = torch.ops.lowbit.mmq(x, w, int(q), scales=s)
    assert torch.equal(eager, torch.ops.lowbit.mmq(x, w, int(q), scales=s))
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.ops.lowbit.mmq(x, w, int(q), scales=s)  # warm-up outside the capture
    stream.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        out = torch.ops.lowbit.mmq(x, w, int(q), scales=s)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, eager)


def test_mmq_weight_beyond_2_31_elements() -> None:
    """N * K > 2^31: rows past element 2^31 are addressed with 64-bit offsets."""
    rng = np.random.default_rng(fresh_seed())
    q = QuantType.IQ1_S
    k = 16384
    n = (1 << 31) // k + 300
    w, s = random_weight(q, 512, k, rng, device=torch.device("cuda"))
    big = w.repeat(n // 512 + 1, 1)[:n].contiguous()  # ~420 MB of IQ1_S blocks
    x = torch.randn(17, k, device="cuda", dtype=torch.bfloat16)
    for math, bound in (("bf16", FLOAT64_BOUND), ("int8", INT8_FLOAT64_BOUND)):
        y = torch.ops.lowbit.mmq(x, big, int(q), math=math)
        tail = big[-300:]
        ref = x.double() @ lowbit.dequantize(tail, q).double().T
        assert rel_err(y[:, -300:], ref) < bound, math
        head = big[:300]
        assert rel_err(y[:, :300], x.double() @ lowbit.dequantize(head, q).double().T) < bound, math


@pytest.mark.parametrize("m", [9, 20, 33, 100])
@pytest.mark.parametrize("qtype", [QuantType.IQ4_XS, QuantType.IQ1_S, QuantType.IQ2_XXS], ids=lambda q: q.type_name)
def test_mmq_auto_arithmetic_is_the_measured_one(qtype: QuantType, m: int) -> None:
    """math="auto" takes the int8 path where it was measured faster (the nibble formats IQ4_XS,
    IQ4_NL, IQ1_S at tiles of 16 and 32 tokens, the grid formats at 16), bf16 elsewhere; bit for bit
    the named path, and the plan says which."""
    rng = np.random.default_rng(fresh_seed())
    n, k = 264, 1024
    w, s = random_weight(qtype, n, k, rng, device=torch.device("cuda"))
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    int8 = m <= (16 if qtype == QuantType.IQ2_XXS else 32)
    named = torch.ops.lowbit.mmq(x, w, int(qtype), scales=s, math="int8" if int8 else "bf16")
    assert torch.equal(torch.ops.lowbit.mmq(x, w, int(qtype), scales=s), named)
    plan = lowbit.select_kernel(qtype, m, n, k, torch.device("cuda"), kernel="mmq")
    assert plan["mmq"]["math"] == ("int8" if int8 else "bf16")


def test_mmq_rejects_bad_arguments() -> None:
    q = QuantType.IQ4_XS
    w, _ = random_weight(q, 64, 256, np.random.default_rng(fresh_seed()), device=torch.device("cuda"))
    with pytest.raises(ValueError, match="x must have shape"):
        torch.ops.lowbit.mmq(torch.randn(4, 512, device="cuda"), w, int(q))
    with pytest.raises((ValueError, RuntimeError), match="x must hold at least one token"):
        torch.ops.lowbit.mmq(torch.randn(0, 256, device="cuda"), w, int(q))


def test_linear_routes_to_mmq_in_its_measured_range() -> None:
    q = QuantType.IQ3_XXS
    n, k = 300, 2048
    assert lowbit.select_kernel(q, 32, n, k, torch.device("cuda"))["kernel"] == "mmq"
    assert lowbit.select_kernel(q, 16, n, k, torch.device("cuda"))["kernel"] == "mmvq"
    # the nibble formats' int8 MMQ from 9 tokens (math auto); bf16 asked for keeps MMVQ
    for m in (9, 16):
        plan = lowbit.select_kernel(QuantType.IQ4_XS, m, n, k, torch.device("cuda"))
        assert plan["kernel"] == "mmq" and plan["mmq"]["math"] == "int8", plan
    assert lowbit.select_kernel(QuantType.IQ4_XS, 8, n, k, torch.device("cuda"))["kernel"] == "mmvq"
    assert lowbit.select_kernel(QuantType.IQ4_XS, 12, n, k, torch.device("cuda"), math="bf16")["kernel"] == "mmvq"
    w4, s4 = random_weight(QuantType.IQ4_XS, n, k, np.random.default_rng(fresh_seed()), device=torch.device("cuda"))
    x12 = torch.randn(12, k, device="cuda", dtype=torch.bfloat16)
    y12 = lowbit.linear(x12, w4, QuantType.IQ4_XS)
    assert torch.equal(y12, torch.ops.lowbit.mmq(x12, w4, int(QuantType.IQ4_XS), math="int8"))
    w, s = random_weight(q, n, k, np.random.default_rng(fresh_seed()), device=torch.device("cuda"))
    x = torch.randn(32, k, device="cuda", dtype=torch.bfloat16)
    assert torch.equal(lowbit.linear(x, w, q), torch.ops.lowbit.mmq(x, w, int(q)))
