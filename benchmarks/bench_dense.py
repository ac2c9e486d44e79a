#!/usr/bin/env python3
"""Dense benchmark on one GPU, following shared/docs/BENCHMARKS.md.

For every weight type and M: lowbit's MMVQ beside dequantize + torch.matmul (bf16) and torch.matmul
on the pre-dequantized bf16 weight (the cuBLAS ceiling), and lowbit's dequantize to bf16, all in
one process on the same shapes. Weights rotate through >= 256 MB so L2 (60 MB) cannot hold them;
activations are fresh random bf16. Times are medians of CUDA-graph replays (each graph holds
`--calls` launches over the rotating buffers, timed after WARM_MS of its replays; the plain-launch
median is in `plain_us`). Every
timed output is checked against a float64 reference (rel_err).

Usage: python benchmarks/bench_dense.py --out DIR [--types iq2_xxs,...] [--m 1,2,4,8,16]
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import math
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import anchors  # noqa: E402
import lowbit  # noqa: E402
from lowbit import QuantType  # noqa: E402
from lowbit.testing import random_weight, rel_err  # noqa: E402

HEADER = "op,kernel,qtype,N,K,M,E,top_k,median_us,weight_GBps,tflops,rel_err,gpu,commit,date,notes,plain_us,rw_GBps"
ROTATION_BYTES = 288 << 20


def commit_id() -> str:
    env = os.environ.get("LOWBIT_COMMIT")
    if env:
        return env
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True).strip()
    except Exception:
        return "unknown"


def warm_and_capture(call: Callable[[int], object], calls: int) -> torch.cuda.CUDAGraph:
    """call(0) .. call(calls - 1) once eagerly (module load, allocator, cuBLAS handles), then
    captured in one CUDA graph on a side stream."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for r in range(calls):
            call(r)
    stream.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for r in range(calls):
            call(r)
    return graph


# Replays before the timed ones, at least this long: a long GEMM (M = 8192: 1.2 ms a call) runs the
# H200 at its power limit, where the clock settles over tens of milliseconds; three replays left a
# kernel timed on the clock its predecessor left (auto 1.07-1.16x the same dequantize + GEMM timed
# just before it, equal after an idle pause: benchmarks/NOTES.md, step 2026-12-03 (3fece8c..)).
WARM_MS = 100.0


def warm_replays(graph: torch.cuda.CUDAGraph) -> None:
    """Replays `graph` for at least WARM_MS, and at least three times, before it is timed."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    warmed, replays = 0.0, 0
    while replays < 3 or warmed < WARM_MS:
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        warmed += start.elapsed_time(end)
        replays += 1


def time_calls(call: Callable[[int], object], calls: int, iters: int) -> tuple[float, float]:
    """(graph-replay median, plain-launch median) per call, in microseconds, after WARM_MS of replays."""
    graph = warm_and_capture(call, calls)
    warm_replays(graph)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    replay = []
    for _ in range(iters):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        replay.append(start.elapsed_time(end) * 1e3 / calls)
    plain = []
    for _ in range(max(5, iters // 5)):
        start.record()
        for r in range(calls):
            call(r)
        end.record()
        end.synchronize()
        plain.append(start.elapsed_time(end) * 1e3 / calls)
    del graph
    return statistics.median(replay), statistics.median(plain)


class Rows:
    def __init__(self, gpu: str, commit: str, date: str) -> None:
        self.rows: list[dict[str, object]] = []
        self.gpu, self.commit, self.date = gpu, commit, date

    def add(self, **kw: object) -> None:
        row = {k: "" for k in HEADER.split(",")}
        row.update(gpu=self.gpu, commit=self.commit, date=self.date)
        row.update({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in kw.items()})
        self.rows.append(row)

    def add_dense(
        self,
        kernel: str,
        qtype: str,
        n: int,
        k: int,
        m: int,
        weight_bytes: int,
        timed: tuple[float, float],
        err: float,
        notes: str,
    ) -> float:
        """A dense row from a (graph-replay, plain) timing in us; returns the graph-replay time."""
        t, plain = timed
        flops = 2.0 * m * n * k
        self.add(
            op="dense",
            kernel=kernel,
            qtype=qtype,
            N=n,
            K=k,
            M=m,
            median_us=t,
            weight_GBps=weight_bytes / t / 1e3,
            tflops=flops / t / 1e6,
            rel_err=err,
            notes=notes,
            plain_us=plain,
        )
        return t

    def write(self, path: Path) -> None:
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=HEADER.split(","))
            w.writeheader()
            w.writerows(self.rows)


@dataclass
class RotatingWeight:
    """A random weight of type q and enough copies of it (>= ROTATION_BYTES) that no two
    consecutive calls find the weight in L2; call r uses copy r % len(ws)."""

    q: QuantType
    w0: torch.Tensor
    s0: torch.Tensor | None
    ws: list[torch.Tensor]
    ss: list[torch.Tensor | None]

    @classmethod
    def make(cls, q: QuantType, n: int, k: int, seed: int) -> RotatingWeight:
        w0, s0 = random_weight(q, n, k, np.random.default_rng(seed + int(q)), device=torch.device("cuda"))
        copies = max(2, math.ceil(ROTATION_BYTES / (w0.numel() + (0 if s0 is None else s0.numel()))))
        ws = [w0] + [w0.clone() for _ in range(copies - 1)]
        ss = [s0] * copies if s0 is None else [s0] + [s0.clone() for _ in range(copies - 1)]
        return cls(q, w0, s0, ws, ss)

    @property
    def nbytes(self) -> int:
        return self.w0.numel() + (0 if self.s0 is None else self.s0.numel())

    def mmvq(self, x: torch.Tensor, r: int, **kw: object) -> torch.Tensor:
        i = r % len(self.ws)
        return torch.ops.lowbit.mmvq(x, self.ws[i], int(self.q), scales=self.ss[i], **kw)

    def linear(self, x: torch.Tensor, r: int, kernel: str | None = None) -> torch.Tensor:
        """lowbit.linear (the dispatcher), or the torch op with a forced kernel."""
        i = r % len(self.ws)
        if kernel is None:
            return lowbit.linear(x, self.ws[i], self.q, scales=self.ss[i])
        return torch.ops.lowbit.linear(x, self.ws[i], int(self.q), scales=self.ss[i], route=kernel)

    def dequantize(self, r: int) -> torch.Tensor:
        i = r % len(self.ws)
        return lowbit.dequantize(self.ws[i], self.q, scales=self.ss[i], dtype=torch.bfloat16)


def bench_type(
    q: QuantType, n: int, k: int, ms: list[int], rows: Rows, args: argparse.Namespace, results: dict
) -> None:
    dev = torch.device("cuda")
    rw = RotatingWeight.make(q, n, k, args.seed)
    wbytes = rw.nbytes
    w64 = lowbit.dequantize(rw.w0, q, scales=rw.s0).double()
    name = q.type_name
    results.setdefault(name, {})
    graph = f"graph replay of {args.calls} calls"

    # dequantize to bf16: bytes read + written
    deq_us, deq_plain = time_calls(rw.dequantize, args.calls, args.iters)
    rw_gbps = (wbytes + 2 * n * k) / (deq_us * 1e-6) / 1e9
    err = rel_err(lowbit.dequantize(rw.w0, q, scales=rw.s0, dtype=torch.bfloat16), w64)
    rows.add(
        op="dequant",
        kernel="dequant",
        qtype=name,
        N=n,
        K=k,
        median_us=deq_us,
        weight_GBps=wbytes / deq_us / 1e3,
        rel_err=err,
        notes=f"to bf16; {graph}",
        plain_us=deq_plain,
        rw_GBps=rw_gbps,
    )
    results[name]["dequant"] = (deq_us, rw_gbps)

    for m in ms:
        x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        ref = x.double() @ w64.T

        def dense_row(kernel: str, timed: tuple[float, float], err: float, note: str, m: int = m) -> float:
            return rows.add_dense(kernel, name, n, k, m, wbytes, timed, err, f"{note}; {graph}")

        int8 = m <= 8 and q != QuantType.MXFP8_E4M3
        if int8:  # the bf16 arithmetic too, for the record (auto takes int8 here)
            timed = time_calls(lambda r, x=x: rw.mmvq(x, r, math="bf16"), args.calls, args.iters)
            err = rel_err(rw.mmvq(x, 0, math="bf16"), ref)
            dense_row("mmvq_bf16", timed, err, "bf16 activations, math=bf16")
        if m <= 16:
            timed = time_calls(lambda r, x=x: rw.mmvq(x, r), args.calls, args.iters)
            err = rel_err(rw.mmvq(x, 0), ref)
            note = "bf16 activations, math=" + ("int8 (q8 per 32 in the kernel)" if int8 else "bf16")
        else:  # MMVQ in passes of 16 tokens (data for the dispatcher's threshold)
            timed = time_calls(lambda r, x=x: rw.linear(x, r, kernel="mmvq"), args.calls, args.iters)
            err = rel_err(rw.linear(x, 0, kernel="mmvq"), ref)
            note = f"bf16 activations; {math.ceil(m / 16)} passes of 16 tokens"
        results[name][("mmvq", m)] = dense_row("mmvq", timed, err, note)

        timed = time_calls(lambda r, x=x: torch.matmul(x, rw.dequantize(r).T), args.calls, args.iters)
        err = rel_err(torch.matmul(x, rw.dequantize(0).T), ref)
        results[name][("dequant_matmul", m)] = dense_row(
            "dequant_matmul", timed, err, "lowbit.dequantize + torch.matmul bf16"
        )

        choice = lowbit.select_kernel(q, m, n, k, dev)
        timed = time_calls(lambda r, x=x: rw.linear(x, r), args.calls, args.iters)
        err = rel_err(rw.linear(x, 0), ref)
        results[name][("auto", m)] = dense_row("auto", timed, err, f"dispatcher chose {choice['kernel']}")


def bench_bf16(n: int, k: int, ms: list[int], rows: Rows, args: argparse.Namespace, results: dict) -> None:
    dev = torch.device("cuda")
    copies = max(2, math.ceil(ROTATION_BYTES / (2 * n * k)))
    ws = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
    for m in ms:
        x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        timed = time_calls(lambda r, x=x: torch.matmul(x, ws[r % copies].T), args.calls, args.iters)
        err = rel_err(torch.matmul(x, ws[0].T), x.double() @ ws[0].double().T)
        note = f"torch.matmul on a bf16 weight; graph replay of {args.calls} calls"
        t = rows.add_dense("bf16_matmul", "bf16", n, k, m, 2 * n * k, timed, err, note)
        results.setdefault("bf16", {})[("bf16_matmul", m)] = t


def summary(results: dict, ms: list[int], n: int, k: int) -> list[str]:
    lines = [f"MMVQ vs ggml (ANCHORS.md), N={n} K={k}; lowbit us / ggml us = speedup"]
    head = f"{'type':<12}" + "".join(f"{'M=' + str(m):>22}" for m in ms) + f"{'dequant bf16':>22}"
    lines.append(head)
    target_fail = []
    m1_speedups = []
    for name, res in results.items():
        if name == "bf16":
            continue
        cells = []
        for m in ms:
            t = res.get(("mmvq", m))
            g = anchors.GGML_DENSE_4096x14336.get(name, {}).get(m) if (n, k) == (4096, 14336) else None
            if t is None:
                cells.append(f"{'-':>22}")
                continue
            if g:
                sp = g / t
                cells.append(f"{t:>8.1f}/{g:<6.1f}={sp:>4.2f}x")
                if name in anchors.I_QUANTS and m == 1:
                    m1_speedups.append(sp)
                    if sp < 1.3:
                        target_fail.append(f"{name} M=1 {sp:.2f}x < 1.3x")
                if m in (2, 4, 8) and sp < 1.0:
                    target_fail.append(f"{name} M={m} {sp:.2f}x slower than ggml")
            else:
                cells.append(f"{t:>8.1f}{'':>14}")
        dq = res.get("dequant")
        if dq:
            cells.append(f"{dq[0]:>9.1f}us {dq[1] / 1e3:>5.2f}TB/s")
            if (n, k) == (4096, 14336):
                if dq[1] / 1e3 < 0.70 * anchors.COPY_TBPS:
                    target_fail.append(f"{name} dequant {dq[1] / 1e3:.2f} TB/s < 70% of {anchors.COPY_TBPS}")
                if name == "iq4_xs" and dq[0] > anchors.DEQUANT_IQ4_XS_TARGET_US:
                    target_fail.append(f"iq4_xs dequant {dq[0]:.1f} us > {anchors.DEQUANT_IQ4_XS_TARGET_US}")
        lines.append(f"{name:<12}" + "".join(cells))
    if m1_speedups:
        gm = math.exp(sum(math.log(s) for s in m1_speedups) / len(m1_speedups))
        lines.append(
            f"M=1 geometric mean speedup over ggml across {len(m1_speedups)} I-quants: {gm:.2f}x (target 1.5x)"
        )
        if gm < 1.5:
            target_fail.append(f"M=1 geomean {gm:.2f}x < 1.5x")
    lines.append("targets: " + ("all met" if not target_fail else "MISSED: " + "; ".join(target_fail)))
    return lines


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--types", default=",".join(t.type_name for t in lowbit.WEIGHT_TYPES))
    ap.add_argument("--m", default="1,2,4,8,16")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, default=14336)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    ms = [int(v) for v in args.m.split(",")]
    gpu = torch.cuda.get_device_name().lower().replace("nvidia ", "").split()[0]
    commit, date = commit_id(), dt.date.today().strftime("%Y%m%d")
    rows = Rows(gpu, commit, date)
    results: dict = {}
    bench_bf16(args.n, args.k, ms, rows, args, results)
    torch.cuda.empty_cache()  # the rotating weights of the call before
    for name in args.types.split(","):
        q = lowbit.as_quant_type(name)
        bench_type(q, args.n, args.k, ms, rows, args, results)
        torch.cuda.empty_cache()
        print(f"done {name}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"dense-{date}-{commit}.csv"
    rows.write(path)
    text = summary(results, ms, args.n, args.k)
    (args.out / f"dense-{date}-{commit}-summary.txt").write_text("\n".join(text) + "\n")
    print("\n".join(text))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
