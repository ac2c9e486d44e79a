"""python -m lowbit {info,demo}: what this build runs, and a short end-to-end demonstration."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable

import torch

import lowbit
from lowbit import QuantType


def _timed(fn: Callable[[], torch.Tensor], device: torch.device, reps: int) -> tuple[torch.Tensor, float]:
    out = fn()  # warm-up (module load, first-call allocations)
    times = []
    for _ in range(reps):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3)
        else:
            t0 = time.perf_counter()
            out = fn()
            times.append((time.perf_counter() - t0) * 1e6)
    return out, statistics.median(times)


def _random_gguf_blocks(qtype: QuantType, n: int, k: int, gen: torch.Generator) -> torch.Tensor:
    """Random bytes with a realistic fp16 scale: a stand-in for a tensor read from a GGUF file."""
    info = next(t for t in lowbit.capabilities()["types"].values() if t["id"] == int(qtype))
    blocks = torch.randint(
        0, 256, (n * k // info["block_elems"], info["block_bytes"]), generator=gen, dtype=torch.uint8
    )
    d = (torch.rand(blocks.shape[0], generator=gen) * 3e-3 + 1e-3).to(torch.float16)
    blocks[:, 0:2] = d.view(torch.uint8).reshape(-1, 2)
    return blocks.reshape(n, -1)


def demo(args: argparse.Namespace) -> int:
    device = torch.device("cuda" if torch.cuda.is_available() and not args.cpu else "cpu")
    gen = torch.Generator().manual_seed(args.seed)
    n, k, m = args.n, args.k, args.m
    print(f"lowbit {lowbit.__version__} on {device} (torch {torch.__version__}); y = x @ W^T with N={n}, K={k}, M={m}")
    dense = torch.randn(n, k, generator=gen) * 0.02
    weights: list[tuple[str, QuantType, torch.Tensor, torch.Tensor | None]] = []
    for q in (QuantType.MXFP8_E4M3, QuantType.MXFP4, QuantType.Q8_0):
        data, scales = lowbit.quantize(dense, q)
        weights.append(("quantized by lowbit.quantize", q, data, scales))
    for q in (QuantType.IQ4_XS, QuantType.IQ3_S, QuantType.IQ2_XXS, QuantType.IQ1_S):
        weights.append(("GGUF blocks (random stand-in)", q, _random_gguf_blocks(q, n, k, gen), None))
    x = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    header = f"{'type':<12} {'source':<38} {'ran':<34} {'median':>10} {'rel err':>9}"
    print(header)
    print("-" * len(header))
    worst = 0.0
    for source, q, data, scales in weights:
        wd = data.to(device)
        sd = None if scales is None else scales.to(device)
        xd = x.to(device)
        y, us = _timed(lambda: lowbit.linear(xd, wd, q, scales=sd), device, args.reps)  # noqa: B023 (called at once)
        ref = x.double() @ lowbit.dequantize(data, q, scales=scales).double().T
        err = float(torch.linalg.vector_norm(y.cpu().double() - ref) / torch.linalg.vector_norm(ref))
        worst = max(worst, err)
        ran = "CUDA kernels" if device.type == "cuda" else "CPU: lowbit decode + torch matmul"
        print(f"{q.type_name:<12} {source:<38} {ran:<34} {us:>8.1f}us {err:>9.2e}")
    ok = worst < 1e-2
    verdict = "OK" if ok else "FAIL"
    print(f"checked against a float64 reference on the decoded weights: worst rel err {worst:.2e} ({verdict})")
    return 0 if ok else 1


def info(_: argparse.Namespace) -> int:
    print(json.dumps(lowbit.capabilities(), indent=2, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lowbit")
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser("demo", help="quantize / load weights, run lowbit.linear, check and time it")
    p_demo.add_argument("--n", type=int, default=4096)
    p_demo.add_argument("--k", type=int, default=4096)
    p_demo.add_argument("--m", type=int, default=4)
    p_demo.add_argument("--reps", type=int, default=5)
    p_demo.add_argument("--seed", type=int, default=0)
    p_demo.add_argument("--cpu", action="store_true", help="run on the CPU even when a GPU exists")
    p_demo.set_defaults(func=demo)
    p_info = sub.add_parser("info", help="print lowbit.capabilities() as JSON")
    p_info.set_defaults(func=info)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
