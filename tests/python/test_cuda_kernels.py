"""CUDA dequantize and MMVQ against the CPU reference: every type, every M the dispatcher can
send to MMVQ, tails, all activation dtypes, poisoned outputs, side streams, the last device
index, CUDA graphs. Skipped cleanly without a GPU."""

from __future__ import annotations

from collections.abc import Callable

import lowbit
import numpy as np
import pytest
import torch
from _helpers import BLOCK, random_weight, rel_err
from _kernel_arithmetic import (
    assert_rounded_result,
    bf16_activations,
    half_ulp_ratio,
    kernel_bf16_weights,
    q8_activations,
    record_error,
)
from lowbit import QuantType

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

TOKENS = (1, 2, 3, 4, 5, 8, 13, 16)
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# ||y - ref|| / ||ref|| against float64 on the float32 decode: weights and activations rounded to
# bf16, float32 accumulation (a correct kernel shows 2.4-4.9e-3). The end-to-end check;
# test_bf16_mmvq_equals_its_arithmetic checks the bf16 path tightly against its own rounding.
MMVQ_BOUND = 1e-2
# The bf16 path against the exact result of its own arithmetic (_kernel_arithmetic.py: bf16(x) times
# bf16(m * bf16(s)), products exact, sums in float64): only the float32 summation on the tensor
# cores differs, about 1e-5 of the norm at K = 14336 (tensor cores align and add with truncation).
# Float32 outputs: ||y - ref|| / ||ref|| < MMVQ_BF16_EXACT_BOUND. Half outputs: each element within
# half an ulp of the output type of ref, plus MMVQ_ACCUMULATE_TOL * rms(ref) for the sums.
MMVQ_BF16_EXACT_BOUND = 3e-5
MMVQ_ACCUMULATE_TOL = 1e-4
# int8 arithmetic: activations to 8 bits per 32 weights, about 0.5% of the norm for K = 14336; with
# a one-block K nothing averages and up to 2.0% was seen (ggml's own test accepts NMSE 5e-4, 2.2%
# of the norm, for this arithmetic). test_int8_mmvq_equals_its_arithmetic checks the int8 path
# tightly (2e-5) against an exact emulation.
MMVQ_INT8_BOUND = 3e-2


def assert_within_forward_bound(
    y: torch.Tensor, ref: torch.Tensor, abs_products: torch.Tensor, k: int, dtype: torch.dtype
) -> None:
    """The bf16 path's error element by element against the forward-error bound of its rounding
    (unit roundoff u = 2^-8 in bf16): x rounded once, the weight at most twice (the block scale,
    then its product with the code), to first order 3u; K float32 additions (K 2^-23, twice their
    first-order bound); all relative to sum |x_i w_i| (abs_products); then the output's own rounding
    relative to |ref| (u of the output type). With one block of K nothing averages: the rows' sums
    can cancel far below sum |x_i w_i|, and the norm bound (MMVQ_BOUND) saw 1.03e-2 for MXFP8 at
    K = 32 (37 rows, M = 1), an input within this bound."""
    unit = 3 * 2.0**-8 + k * 2.0**-23
    out_rounding = half_ulp_ratio(dtype)  # of |y before its rounding| <= |ref| + unit * abs_products
    diff = (y.double().cpu() - ref.cpu()).abs()
    allowed = unit * (1 + out_rounding) * abs_products.cpu() + out_rounding * ref.abs().cpu()
    worst = float((diff - allowed).max())
    assert worst <= 0.0, f"beyond the forward bound by {worst:.3g} (largest |ref| {float(ref.abs().max()):.3g})"


def device() -> torch.device:
    return torch.device("cuda", torch.cuda.device_count() - 1)  # the last index: not always 0


def shapes(qtype: QuantType) -> list[tuple[str, int, int]]:
    elems, _ = BLOCK[qtype]
    partial = 416 if elems == 32 else 768  # 32-weight types: a last 256-unit of 5 blocks
    # an even number of blocks per row (the dp4a MMVQ then reads the 2-mod-4-byte formats as
    # aligned words) whose last round of sub-blocks leaves threads idle: 66 or 10 blocks
    paired = 2112 if elems == 32 else 2560
    return [
        ("one_block", 37, elems),
        ("partial_unit", 77, partial),
        ("paired_partial", 45, paired),
        ("k14336", 300, 14336),
    ]


def poisoned(fn: Callable[[], torch.Tensor], shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Runs fn after filling, then freeing, a NaN tensor of the output's size, so the caching
    allocator hands the same (poisoned) memory to the output: every element must be written."""
    torch.cuda.empty_cache()  # only the bait's memory is free afterwards, so the output lands on it
    bait = torch.full(shape, float("nan"), dtype=dtype, device=device())
    ptr = bait.data_ptr()
    del bait
    out = fn()
    assert out.data_ptr() == ptr, "the poisoned block was not reused; the check would prove nothing"
    return out


@pytest.mark.parametrize("qtype", lowbit.WEIGHT_TYPES, ids=lambda t: t.type_name)
def test_dequantize_matches_cpu_bit_for_bit(qtype: QuantType, rng: np.random.Generator) -> None:
    dev = device()
    for name, n, k in shapes(qtype) + [("experts", 3 * 29, BLOCK[qtype][0] * 8)]:
        experts = 3 if name == "experts" else 0
        rows = n // 3 if experts else n
        w, s = random_weight(qtype, rows, k, rng, experts=experts)
        for dtype in DTYPES:
            ref = lowbit.dequantize(w, qtype, scales=s, dtype=dtype)
            wd, sd = w.to(dev), None if s is None else s.to(dev)
            out = poisoned(lambda: lowbit.dequantize(wd, qtype, scales=sd, dtype=dtype), tuple(ref.shape), dtype)  # noqa: B023 (called at once)
            assert torch.equal(out.cpu(), ref), f"{qtype.type_name} {name} {dtype}"


def int8_maths(qtype: QuantType, m: int) -> list[str]:
    return ["bf16", "int8"] if m <= 8 and qtype != QuantType.MXFP8_E4M3 else ["bf16"]


@pytest.mark.parametrize("qtype", lowbit.WEIGHT_TYPES, ids=lambda t: t.type_name)
def test_mmvq_matches_reference(qtype: QuantType, rng: np.random.Generator) -> None:
    dev = device()
    for name, n, k in shapes(qtype):
        w, s = random_weight(qtype, n, k, rng)
        wf = lowbit.dequantize(w, qtype, scales=s).double()
        wd, sd = w.to(dev), None if s is None else s.to(dev)
        for dtype in DTYPES:
            x_all = torch.from_numpy(rng.standard_normal((16, k)).astype(np.float32)).to(dtype)
            for m in TOKENS:
                x = x_all[:m].contiguous()
                ref = x.double() @ wf.T
                xd = x.to(dev)
                for math in int8_maths(qtype, m):
                    y = poisoned(lambda: torch.ops.lowbit.mmvq(xd, wd, int(qtype), scales=sd, math=math), (m, n), dtype)  # noqa: B023 (called at once)
                    assert y.dtype == dtype and y.shape == (m, n)
                    if math == "bf16" and name == "one_block":
                        assert_within_forward_bound(y, ref, x.double().abs() @ wf.abs().T, k, dtype)
                        continue
                    err = rel_err(y, ref)
                    bound = MMVQ_INT8_BOUND if math == "int8" else MMVQ_BOUND
                    assert err < bound, f"{qtype.type_name} {name} M={m} {dtype} {math}: rel err {err:.3g}"


@pytest.mark.parametrize(
    "qtype", [t for t in lowbit.WEIGHT_TYPES if t != QuantType.MXFP8_E4M3], ids=lambda t: t.type_name
)
def test_int8_mmvq_equals_its_arithmetic(qtype: QuantType, rng: np.random.Generator) -> None:
    """Tight check of the int8 path: against the exact result on the emulated int8 activations,
    only float32 summation order (and the output rounding of half types) may differ."""
    dev = device()
    for name, n, k in shapes(qtype):
        w, s = random_weight(qtype, n, k, rng)
        wf = lowbit.dequantize(w, qtype, scales=s).double()
        wd, sd = w.to(dev), None if s is None else s.to(dev)
        for dtype, bound in ((torch.float32, 2e-5), (torch.bfloat16, 6e-3), (torch.float16, 1e-3)):
            scale = torch.from_numpy(rng.uniform(0.05, 5.0, (8, k // 32, 1)).astype(np.float32))
            x_all = (torch.from_numpy(rng.standard_normal((8, k // 32, 32)).astype(np.float32)) * scale).reshape(8, k)
            x_all[1, -32:] = 0.0  # an all-zero sub-block (amax = 0)
            x_all = x_all.to(dtype)
            for m in (1, 2, 3, 4, 5, 8):
                x = x_all[:m].contiguous()
                ref = q8_activations(x) @ wf.T
                y = torch.ops.lowbit.mmvq(x.to(dev), wd, int(qtype), scales=sd, math="int8")
                err = rel_err(y, ref)
                assert err < bound, f"{qtype.type_name} {name} M={m} {dtype}: rel err {err:.3g}"


@pytest.mark.parametrize("qtype", lowbit.WEIGHT_TYPES, ids=lambda t: t.type_name)
def test_bf16_mmvq_equals_its_arithmetic(qtype: QuantType, rng: np.random.Generator) -> None:
    """Tight check of the bf16 tensor-core path, every type (MXFP8 and MXFP4_SPLIT included), every
    M it serves, every activation dtype: against the exact result on the weights and activations as
    the kernel rounds them (a block scale 0.5% off, or one wrong weight per row, fails)."""
    dev = device()
    for name, n, k in shapes(qtype):
        w, s = random_weight(qtype, n, k, rng)
        wb = kernel_bf16_weights(qtype, w, s)
        wd, sd = w.to(dev), None if s is None else s.to(dev)
        for dtype in DTYPES:
            x_all = torch.from_numpy(rng.standard_normal((16, k)).astype(np.float32)).to(dtype)
            for m in TOKENS:
                x = x_all[:m].contiguous()
                ref = bf16_activations(x) @ wb.T
                xd = x.to(dev)
                y = poisoned(lambda: torch.ops.lowbit.mmvq(xd, wd, int(qtype), scales=sd, math="bf16"), (m, n), dtype)  # noqa: B023 (called at once)
                what = f"{qtype.type_name} {name} M={m} {dtype}"
                if dtype == torch.float32:
                    err = rel_err(y, ref)
                    record_error("bf16_mmvq_exact", what, err)
                    assert err < MMVQ_BF16_EXACT_BOUND, f"{what}: rel err {err:.3g}"
                else:
                    assert_rounded_result(y, ref, MMVQ_ACCUMULATE_TOL, what)


@pytest.mark.parametrize("qtype", lowbit.WEIGHT_TYPES, ids=lambda t: t.type_name)
def test_mmvq_bias_equals_its_arithmetic(qtype: QuantType, rng: np.random.Generator) -> None:
    """The linear op forced to MMVQ with a bias as large as x W^T (a bias added twice, dropped or
    added to the wrong rows shows): int8 arithmetic at M = 3 (bf16 for MXFP8), bf16 at M = 13."""
    dev = device()
    _, n, k = shapes(qtype)[1]  # a partial 256-unit
    w, s = random_weight(qtype, n, k, rng)
    wf, wb = lowbit.dequantize(w, qtype, scales=s).double(), kernel_bf16_weights(qtype, w, s)
    wd, sd = w.to(dev), None if s is None else s.to(dev)
    x_all = torch.from_numpy(rng.standard_normal((13, k)).astype(np.float32))
    rms = float((x_all.double() @ wf.T).square().mean().sqrt())
    bias = torch.from_numpy(rng.standard_normal(n) * rms).float()
    for m in (3, 13):
        x = x_all[:m].contiguous()
        int8 = m <= 8 and qtype != QuantType.MXFP8_E4M3
        ref = (q8_activations(x) @ wf.T if int8 else bf16_activations(x) @ wb.T) + bias.double()
        y = torch.ops.lowbit.linear(x.to(dev), wd, int(qtype), scales=sd, bias=bias.to(dev), route="mmvq")
        err = rel_err(y, ref)
        record_error("mmvq_bias_exact", f"{qtype.type_name} M={m}", err)
        bound = 2e-5 if int8 else MMVQ_BF16_EXACT_BOUND
        assert err < bound, f"{qtype.type_name} M={m} ({'int8' if int8 else 'bf16'}): rel err {err:.3g}"


@pytest.mark.parametrize("qtype", [QuantType.IQ4_XS, QuantType.IQ1_S, QuantType.MXFP4_SPLIT], ids=lambda t: t.type_name)
def test_few_token_mmvq_over_many_row_groups(qtype: QuantType, rng: np.random.Generator) -> None:
    """A weight tall enough that every team of the dp4a kernel (one block per SM, 32 warps) takes
    at least three row groups in turn (its partial-sum sets reused), with a row tail and a last
    round of sub-blocks that leaves threads idle: K = 4352 is 136 sub-blocks. M = 1 and 2 run
    there for all three types, M = 3 and 4 for IQ4_XS and IQ1_S (the kernel of four tokens, one row
    per warp)."""
    dev = device()
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    # rows one pass of the grid covers: 32 one-row warps or 16 two-row teams per SM
    n, k = 3 * 32 * sms + 3, 4352
    w, s = random_weight(qtype, n, k, rng)
    wf = lowbit.dequantize(w, qtype, scales=s).double()
    wd, sd = w.to(dev), None if s is None else s.to(dev)
    x = torch.from_numpy(rng.standard_normal((4, k)).astype(np.float32))
    for m in (1, 2, 3, 4):
        ref = q8_activations(x[:m]) @ wf.T
        xd = x[:m].to(dev)
        y = poisoned(lambda: torch.ops.lowbit.mmvq(xd, wd, int(qtype), scales=sd, math="int8"), (m, n), torch.float32)  # noqa: B023 (called at once)
        err = rel_err(y, ref)
        assert err < 2e-5, f"{qtype.type_name} M={m}: rel err {err:.3g}"


@pytest.mark.parametrize("qtype", [QuantType.IQ4_XS, QuantType.IQ2_XXS], ids=lambda t: t.type_name)
def test_few_token_mmvq_with_activations_beyond_shared_memory(qtype: QuantType, rng: np.random.Generator) -> None:
    """K = 131072: one token's int8 activations (147 KB with their scales) fit a block's shared
    memory on Hopper (227 KB) and the dp4a kernel runs; two tokens' (294 KB) fit nowhere, and the
    tensor-core kernel takes the call. Both match the exact int8 arithmetic."""
    dev = device()
    n, k = 67, 131072
    # one token's codes and scales take 147 KB (plus the codebook table): A100, H100/H200 and
    # B200 allow a block 163-227 KB, sm_86 / sm_89 99 KB
    optin = getattr(torch.cuda.get_device_properties(dev), "shared_memory_per_block_optin", None)
    fits_one = optin >= 152 * 1024 if optin else torch.cuda.get_device_capability(dev) in {(8, 0), (9, 0), (10, 0)}
    assert lowbit.select_kernel(qtype, 1, n, k, dev)["mmvq_kernel"] == ("dp4a" if fits_one else "int8_tensor_cores")
    assert lowbit.select_kernel(qtype, 2, n, k, dev)["mmvq_kernel"] == "int8_tensor_cores"
    w, s = random_weight(qtype, n, k, rng)
    wf = lowbit.dequantize(w, qtype, scales=s).double()
    wd = w.to(dev)
    x = torch.from_numpy(rng.standard_normal((2, k)).astype(np.float32))
    for m in (1, 2):
        ref = q8_activations(x[:m]) @ wf.T
        xd = x[:m].to(dev)
        y = poisoned(lambda: torch.ops.lowbit.mmvq(xd, wd, int(qtype), math="int8"), (m, n), torch.float32)  # noqa: B023 (called at once)
        err = rel_err(y, ref)
        assert err < 2e-5, f"{qtype.type_name} M={m}: rel err {err:.3g}"


@pytest.mark.parametrize(
    "qtype", [QuantType.IQ2_XXS, QuantType.IQ4_XS, QuantType.MXFP4_SPLIT], ids=lambda t: t.type_name
)
def test_linear_dispatch_on_a_side_stream(qtype: QuantType, rng: np.random.Generator) -> None:
    dev = device()
    w, s = random_weight(qtype, 129, 1024, rng)
    wf = lowbit.dequantize(w, qtype, scales=s).double()
    wd, sd = w.to(dev), None if s is None else s.to(dev)
    stream = torch.cuda.Stream(device=dev)
    # one and two MMVQ passes (MMQ from 17 tokens where it runs, its int8 path from 9 for the nibble
    # formats), then dequantize + bf16 GEMM
    mmq = lowbit.capabilities()["types"][qtype.type_name]["kernels"]["cuda_mmq"] and torch.cuda.get_device_capability(
        dev
    ) == (9, 0)
    for m in (1, 16, 17, 64, 200):
        x = torch.from_numpy(rng.standard_normal((m, 1024)).astype(np.float32)).to(torch.bfloat16)
        bias = torch.from_numpy(rng.standard_normal(129).astype(np.float32))
        with torch.cuda.stream(stream):
            y = lowbit.linear(x.to(dev), wd, qtype, scales=sd, bias=bias.to(dev))
        stream.synchronize()
        ref = x.double() @ wf.T + bias.double()
        plan = lowbit.select_kernel(qtype, m, 129, 1024, dev)
        int8 = m <= 8 or plan.get("mmq", {}).get("math") == "int8"  # MMQ's int8 path where measured faster
        assert rel_err(y, ref) < (MMVQ_INT8_BOUND if int8 else MMVQ_BOUND), f"M={m}"
        kernel = plan["kernel"]
        # K = 1024 is below the MMQ range's short K: MMQ up to 32 tokens where it runs, then
        # dequantize + bf16 GEMM (where MMQ does not run, M = 17 depends on the GPU's MMVQ limit)
        expected = {1: "mmvq", 17: "mmq" if mmq else None, 64: "dequant_matmul", 200: "dequant_matmul"}.get(m)
        if expected is not None:
            assert kernel == expected, f"M={m}: {kernel}"


@pytest.mark.parametrize("math", ["int8", "bf16"])
def test_non_finite_activations_reach_the_output(math: str, rng: np.random.Generator) -> None:
    dev = device()
    w, _ = random_weight(QuantType.IQ4_XS, 40, 512, rng)
    x = torch.from_numpy(rng.standard_normal((3, 512)).astype(np.float32)).to(dev, torch.bfloat16)
    x[1, 77] = float("nan")
    y = torch.ops.lowbit.mmvq(x, w.to(dev), int(QuantType.IQ4_XS), math=math).float().cpu()
    assert torch.isnan(y[1]).all(), "a NaN activation must make its token's outputs NaN"
    assert torch.isfinite(y[0]).all() and torch.isfinite(y[2]).all()


def test_forced_kernels_equal_their_arithmetic(rng: np.random.Generator) -> None:
    """Each forced kernel against its own tight reference (not against each other): MMVQ with int8
    arithmetic (M = 8) and bf16 arithmetic (M = 13); dequantize to bf16 + the bf16 GEMM, whose
    reduced-precision split-K reductions are switched off for the check."""
    dev = device()
    qtype = QuantType.IQ3_S
    w, _ = random_weight(qtype, 64, 2048, rng)
    wd = w.to(dev)
    wf, wb = lowbit.dequantize(w, qtype).double(), kernel_bf16_weights(qtype, w)
    w_bf16 = lowbit.dequantize(w, qtype, dtype=torch.bfloat16).double()  # what dequant_matmul multiplies
    x_all = torch.from_numpy(rng.standard_normal((13, 2048)).astype(np.float32)).to(torch.bfloat16)
    matmul = torch.backends.cuda.matmul
    reduced = matmul.allow_bf16_reduced_precision_reduction
    matmul.allow_bf16_reduced_precision_reduction = False
    try:
        for m in (8, 13):
            x = x_all[:m].contiguous()
            a = torch.ops.lowbit.linear(x.to(dev), wd, int(qtype), route="mmvq")
            a_ref = q8_activations(x) @ wf.T if m <= 8 else bf16_activations(x) @ wb.T
            assert_rounded_result(a, a_ref, MMVQ_ACCUMULATE_TOL, f"mmvq M={m}")
            b = torch.ops.lowbit.linear(x.to(dev), wd, int(qtype), route="dequant_matmul")
            assert_rounded_result(b, bf16_activations(x) @ w_bf16.T, MMVQ_ACCUMULATE_TOL, f"dequant_matmul M={m}")
    finally:
        matmul.allow_bf16_reduced_precision_reduction = reduced
    x = x_all.to(dev)
    with pytest.raises(ValueError, match=r"route: unknown kernel \"fast\""):
        torch.ops.lowbit.linear(x, wd, int(qtype), route="fast")
    with pytest.raises(ValueError, match=r"x must be \[M, K\] with 1 <= M <= 16 for mmvq"):
        torch.ops.lowbit.mmvq(torch.zeros(17, 2048, device=dev), wd, int(qtype))


def test_cuda_graph_capture_and_replay(rng: np.random.Generator) -> None:
    dev = device()
    torch.cuda.set_device(dev)
    w, _ = random_weight(QuantType.IQ2_S, 200, 2048, rng)
    wd = w.to(dev)
    x = torch.from_numpy(rng.standard_normal((4, 2048)).astype(np.float32)).to(dev, torch.bfloat16)
    side = torch.cuda.Stream(device=dev)
    with torch.cuda.stream(side):  # warm up outside the capture
        lowbit.linear(x, wd, "iq2_s")
        lowbit.dequantize(wd, "iq2_s", dtype=torch.bfloat16)
    side.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = lowbit.linear(x, wd, "iq2_s")
        d = lowbit.dequantize(wd, "iq2_s", dtype=torch.bfloat16)
    x.copy_(torch.from_numpy(rng.standard_normal((4, 2048)).astype(np.float32)).to(dev, torch.bfloat16))
    graph.replay()
    torch.cuda.synchronize(dev)
    assert torch.equal(y, lowbit.linear(x, wd, "iq2_s"))
    assert torch.equal(d, lowbit.dequantize(wd, "iq2_s", dtype=torch.bfloat16))


def test_results_are_deterministic(rng: np.random.Generator) -> None:
    dev = device()
    w, _ = random_weight(QuantType.IQ1_M, 512, 4096, rng)
    wd = w.to(dev)
    x = torch.from_numpy(rng.standard_normal((13, 4096)).astype(np.float32)).to(dev)
    first = lowbit.linear(x, wd, "iq1_m")
    for _ in range(3):
        assert torch.equal(lowbit.linear(x, wd, "iq1_m"), first)


def test_misaligned_weight_views_are_handled(rng: np.random.Generator) -> None:
    dev = device()
    w, _ = random_weight(QuantType.IQ4_NL, 40, 64, rng)  # rows of 36 bytes: row 1 starts 4 bytes off 16
    wd = w.to(dev)[1:]
    x = torch.from_numpy(rng.standard_normal((2, 64)).astype(np.float32)).to(dev)
    ref = x.double().cpu() @ lowbit.dequantize(w[1:], "iq4_nl").double().T
    assert rel_err(lowbit.linear(x, wd, "iq4_nl"), ref) < MMVQ_INT8_BOUND
    assert torch.equal(lowbit.dequantize(wd, "iq4_nl").cpu(), lowbit.dequantize(w[1:], "iq4_nl"))


def test_capabilities_report_the_device() -> None:
    caps = lowbit.capabilities()
    assert caps["build"]["cuda_compiled"]
    assert len(caps["cuda_devices"]) == torch.cuda.device_count()
    assert all(
        t["kernels"]["cuda_mmvq"] and t["kernels"]["cuda_dequant"] for t in caps["types"].values() if t["is_weight"]
    )
