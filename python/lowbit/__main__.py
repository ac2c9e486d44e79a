"""python -m lowbit {info,demo,gguf-info}: what this build runs, a short end-to-end demonstration on
a GGUF file, and what lowbit would run for each tensor of a GGUF file."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np
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


def _write_demo_file(path: str, n: int, k: int, seed: int) -> None:
    """A small GGUF file written with the gguf writer: Q8_0 and GGUF MXFP4 quantized by lowbit
    from a dense weight, and I-quant tensors of random valid blocks (quantizing to I-quants needs
    llama.cpp's importance-matrix quantizer, which is not part of lowbit)."""
    from lowbit.gguf import write_gguf
    from lowbit.testing import random_weight

    gen = torch.Generator().manual_seed(seed)
    dense = torch.randn(n, k, generator=gen) * 0.02
    weights: list[tuple[str, torch.Tensor, QuantType]] = []
    for q in (QuantType.Q8_0, QuantType.MXFP4):
        weights.append((f"demo.{q.type_name}.weight", lowbit.quantize(dense, q)[0], q))
    rng = np.random.default_rng(seed)
    for q in (QuantType.IQ4_XS, QuantType.IQ3_S, QuantType.IQ2_XXS, QuantType.IQ1_S):
        weights.append((f"demo.{q.type_name}.weight", random_weight(q, n, k, rng)[0], q))
    write_gguf(path, weights)


def demo(args: argparse.Namespace) -> int:
    from lowbit.gguf import open_gguf

    device = torch.device("cuda" if torch.cuda.is_available() and not args.cpu else "cpu")
    with tempfile.TemporaryDirectory() as tmp:
        path = args.file
        if path is None:
            path = os.path.join(tmp, "lowbit-demo.gguf")
            _write_demo_file(path, args.n, args.k, args.seed)
            print(f"wrote {path} with the gguf writer (pass a GGUF file to run on its tensors)")
        f = open_gguf(path)
        dense = [t for t in f.tensors() if t.qtype is not None and len(t.shape) == 2][: args.max_tensors]
        if not dense:
            print(f"{path}: no 2-D tensor of a type lowbit computes on")
            return 1
        m = args.m
        print(f"lowbit {lowbit.__version__} on {device} (torch {torch.__version__}); y = x @ W^T, M={m}, from {path}")
        header = f"{'tensor':<32} {'type':<9} {'N x K':>13} {'ran':<36} {'median':>10} {'rel err':>9}"
        print(header)
        print("-" * len(header))
        gen = torch.Generator().manual_seed(args.seed)
        worst = 0.0
        for t in dense:
            w, q = f.weight(t.name)
            n, k = t.shape
            x = torch.randn(m, k, generator=gen).to(torch.bfloat16)
            wd, xd = w.to(device), x.to(device)
            y, us = _timed(lambda: lowbit.linear(xd, wd, q), device, args.reps)  # noqa: B023 (called at once)
            ref = x.double() @ lowbit.dequantize(w, q).double().T
            err = float(torch.linalg.vector_norm(y.cpu().double() - ref) / torch.linalg.vector_norm(ref))
            worst = max(worst, err)
            ran = lowbit.select_kernel(q, m, n, k, device)["kernel"]
            ran = f"CUDA {ran}" if device.type == "cuda" else "CPU: lowbit decode + torch matmul"
            print(f"{t.name[:32]:<32} {q.type_name:<9} {f'{n} x {k}':>13} {ran:<36} {us:>8.1f}us {err:>9.2e}")
        ok = worst < 1e-2
        verdict = "OK" if ok else "FAIL"
        print(f"checked against a float64 reference on the decoded weights: worst rel err {worst:.2e} ({verdict})")
        return 0 if ok else 1


def gguf_info(args: argparse.Namespace) -> int:
    from lowbit.gguf import kernel_summary, open_gguf

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    f = open_gguf(args.file)
    header = f"{'tensor':<40} {'ggml type':<10} {'shape':<22} {'lowbit':<12} kernel on {device}"
    print(header)
    print("-" * len(header))
    for t in f.tensors():
        lowbit_type = t.qtype.type_name if t.qtype is not None else "-"
        shape = " x ".join(str(d) for d in t.shape)
        print(f"{t.name:<40} {t.type_name:<10} {shape:<22} {lowbit_type:<12} {kernel_summary(t, device)}")
    return 0


def info(_: argparse.Namespace) -> int:
    print(json.dumps(lowbit.capabilities(), indent=2, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lowbit")
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser("demo", help="run lowbit.linear on a GGUF file's weights, check and time it")
    p_demo.add_argument("file", nargs="?", default=None, help="a GGUF file (default: write a small one)")
    p_demo.add_argument("--n", type=int, default=2048, help="rows of the written file's weights")
    p_demo.add_argument("--k", type=int, default=4096, help="columns of the written file's weights")
    p_demo.add_argument("--max-tensors", type=int, default=8, help="run at most this many tensors of the file")
    p_demo.add_argument("--m", type=int, default=4)
    p_demo.add_argument("--reps", type=int, default=5)
    p_demo.add_argument("--seed", type=int, default=0)
    p_demo.add_argument("--cpu", action="store_true", help="run on the CPU even when a GPU exists")
    p_demo.set_defaults(func=demo)
    p_info = sub.add_parser("info", help="print lowbit.capabilities() as JSON")
    p_info.set_defaults(func=info)
    p_gguf = sub.add_parser("gguf-info", help="a GGUF file's tensors: types, shapes, lowbit type and kernel")
    p_gguf.add_argument("file")
    p_gguf.add_argument("--device", default=None, help="cpu or cuda[:i] (default: cuda when available)")
    p_gguf.set_defaults(func=gguf_info)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
