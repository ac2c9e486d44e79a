#!/usr/bin/env python3
"""Prefill benchmark on one GPU (shared/docs/BENCHMARKS.md): lowbit's MMQ beside MMVQ (M <= 16),
dequantize + torch.matmul (bf16), torch.matmul on the pre-dequantized bf16 weight (cuBLAS) and
`auto` (what lowbit.linear picks), same process, same shapes, weights rotating through >= 288 MB,
fresh random bf16 activations, every timed output checked against float64 (rel_err). Times are
medians of CUDA-graph replays (`plain_us`: plain launches) after 100 ms of the same replays (the
clock of a kernel's own steady state, bench_dense.WARM_MS), the faster of two rounds timed in
alternating order. Writes mmq-<date>-<commit>.csv and a
summary against the issue's targets and ggml's MMQ (ANCHORS.md).

Usage: python benchmarks/bench_mmq.py --out DIR [--types iq4_xs,...] [--m 16,32,...] [--shapes 4096x14336,...]
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import sys
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import anchors  # noqa: E402
import bench_dense as bd  # noqa: E402
import lowbit  # noqa: E402
from lowbit.testing import rel_err  # noqa: E402


def bench_shape(q: lowbit.QuantType, n: int, k: int, ms: list[int], rows: bd.Rows, args, results: dict) -> None:
    dev = torch.device("cuda")
    rw = bd.RotatingWeight.make(q, n, k, args.seed)
    w64 = lowbit.dequantize(rw.w0, q, scales=rw.s0).double()
    name = q.type_name

    def mmq(x: torch.Tensor, r: int, math: str = "auto") -> torch.Tensor:
        i = r % len(rw.ws)
        return torch.ops.lowbit.mmq(x, rw.ws[i], int(q), scales=rw.ss[i], math=math)

    int8 = lowbit._C.mmq_int8_supported(int(q))  # the types whose MMQ has the int8 path

    for m in ms:
        calls = max(2, min(args.calls, int(args.calls * 128 / max(m, 128))))
        x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        ref = x.double() @ w64.T
        key = (name, n, k, m)
        graph = f"graph replay of {calls} calls"
        choice = lowbit.select_kernel(q, m, n, k, dev)
        # (kernel, call, note); each output checked once against float64
        kernels: list[tuple[str, Callable[[int], torch.Tensor], str]] = [
            ("mmq", lambda r, x=x: mmq(x, r), "wgmma, weights decoded on chip")
        ]
        if int8:
            note = "int8 wgmma, activations int8 per 32 weights (math=int8)"
            kernels.append(("mmq_int8", lambda r, x=x: mmq(x, r, "int8"), note))
        if m <= 16:  # MMVQ's range: the kernel MMQ replaces there
            kernels.append(("mmvq", lambda r, x=x: rw.mmvq(x, r), "MMVQ (math auto)"))
        kernels.append(
            ("dequant_matmul", lambda r, x=x: torch.matmul(x, rw.dequantize(r).T), "lowbit.dequantize + torch.matmul")
        )
        kernels.append(("auto", lambda r, x=x: rw.linear(x, r), f"dispatcher chose {choice['kernel']}"))
        # Two rounds in alternating order, the faster of each kernel's two medians kept: timed once
        # in a fixed order, the last kernel measured behind the same kernels timed just before it
        # (benchmarks/NOTES.md, M = 8192), so the order must not decide a row.
        best: dict[str, tuple[float, float]] = {}
        for order in (kernels, kernels[::-1]):
            for kernel, call, _ in order:
                timed = bd.time_calls(call, calls, args.iters)
                if kernel not in best or timed[0] < best[kernel][0]:
                    best[kernel] = timed
        for kernel, call, note in kernels:
            err = rel_err(call(0), ref)
            results[key + (kernel,)] = rows.add_dense(
                kernel,
                name,
                n,
                k,
                m,
                rw.nbytes,
                best[kernel],
                err,
                f"{note}; {graph}, faster of two alternating rounds",
            )


def bench_bf16(n: int, k: int, ms: list[int], rows: bd.Rows, args, results: dict) -> None:
    dev = torch.device("cuda")
    copies = max(2, math.ceil(bd.ROTATION_BYTES / (2 * n * k)))
    ws = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
    for m in ms:
        calls = max(2, min(args.calls, int(args.calls * 128 / max(m, 128))))
        x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        # the faster of two medians, as every lowbit row (bench_shape)
        timed = min(
            (bd.time_calls(lambda r, x=x: torch.matmul(x, ws[r % copies].T), calls, args.iters) for _ in range(2)),
            key=lambda tp: tp[0],
        )
        err = rel_err(torch.matmul(x, ws[0].T), x.double() @ ws[0].double().T)
        note = f"torch.matmul on a bf16 weight; graph replay of {calls} calls, faster of two rounds"
        results[("bf16", n, k, m, "bf16_matmul")] = rows.add_dense(
            "bf16_matmul", "bf16", n, k, m, 2 * n * k, timed, err, note
        )
    ws.clear()
    torch.cuda.empty_cache()


def summary(results: dict, types: list[str], shapes: list[tuple[int, int]], ms: list[int]) -> list[str]:
    lines, miss = [], []
    for n, k in shapes:
        lines.append(
            f"N={n} K={k}: mmq us (x vs bf16_matmul; x vs ggml MMQ where known), int8 us, mmvq us (M <= 16) "
            "| auto/fastest"
        )
        for name in types:
            cells = []
            for m in ms:
                t = results.get((name, n, k, m, "mmq"))
                b = results.get(("bf16", n, k, m, "bf16_matmul"))
                if t is None:
                    continue
                cell = f"M={m}: {t:.1f}"
                if b:
                    cell += f" ({b / t:.2f}x bf16)"
                    if m == 128 and name in anchors.I_QUANTS and t >= b:
                        miss.append(f"{name} {n}x{k} M=128 mmq {t:.1f} >= bf16 {b:.1f}")
                    if m == 512 and t > 1.05 * b:
                        miss.append(f"{name} {n}x{k} M=512 mmq {t:.1f} > 1.05 x bf16 {b:.1f}")
                    if m in (2048, 8192) and t > 1.10 * b:
                        miss.append(f"{name} {n}x{k} M={m} mmq {t:.1f} > 1.10 x bf16 {b:.1f}")
                g = anchors.GGML_MMQ_4096x14336.get(name, {}).get(m) if (n, k) == (4096, 14336) else None
                if g:
                    cell += f" ({g / t:.2f}x ggml)"
                    if m in (16, 32, 64) and name in anchors.I_QUANTS and g / t < 2.0:
                        miss.append(f"{name} M={m} {g / t:.2f}x ggml < 2x")
                t8 = results.get((name, n, k, m, "mmq_int8"))
                if t8 is not None:
                    cell += f" int8 {t8:.1f}" + (f" ({g / t8:.2f}x ggml)" if g else "")
                tv = results.get((name, n, k, m, "mmvq"))
                if tv is not None:
                    cell += f" mmvq {tv:.1f}"
                kernels = [results.get((name, n, k, m, kk)) for kk in ("mmq", "mmq_int8", "mmvq", "dequant_matmul")]
                fastest = min(v for v in kernels if v is not None)
                a = results.get((name, n, k, m, "auto"))
                if a is not None:
                    cell += f" | {a / fastest:.2f}"
                    if a > 1.10 * fastest:
                        miss.append(f"{name} {n}x{k} M={m} auto {a:.1f} > 1.10 x fastest {fastest:.1f}")
                cells.append(cell)
            lines.append(f"  {name:<12}" + "; ".join(cells))
    lines.append("targets: " + ("all met" if not miss else f"MISSED ({len(miss)}): " + "; ".join(miss)))
    return lines


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--types", default=",".join(anchors.I_QUANTS))
    ap.add_argument("--m", default="16,32,64,128,512,2048,8192")
    ap.add_argument("--shapes", default="4096x14336,14336x4096,18944x1024")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    ms = [int(v) for v in args.m.split(",")]
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    types = args.types.split(",")
    gpu = torch.cuda.get_device_name().lower().replace("nvidia ", "").split()[0]
    commit, date = bd.commit_id(), dt.date.today().strftime("%Y%m%d")
    rows = bd.Rows(gpu, commit, date)
    results: dict = {}
    for n, k in shapes:
        bench_bf16(n, k, ms, rows, args, results)
        for name in types:
            bench_shape(lowbit.as_quant_type(name), n, k, ms, rows, args, results)
            torch.cuda.empty_cache()
            print(f"done {name} {n}x{k}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"mmq-{date}-{commit}.csv"
    rows.write(path)
    text = summary(results, types, shapes, ms)
    (args.out / f"mmq-{date}-{commit}-summary.txt").write_text("\n".join(text) + "\n")
    print("\n".join(text))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
