#!/usr/bin/env python3
"""MoE benchmark on one GPU, following shared/docs/BENCHMARKS.md.

op=moe_proj: one projection over all experts (E=128, top-8, N=768, K=2048, like ggml's
MUL_MAT_ID) for iq2_xxs, iq3_s, iq4_xs at 1, 8, 32, 128, 512 tokens. op=moe_layer: the whole
layer for Qwen3-30B-A3B (IQ4_XS; E=128, top-8, H=2048, I=768) and a DeepSeek-like layer (E=256,
top-8, H=7168, I=2048, IQ3_XXS gate/up, IQ2_XS down) at 1 ... 4096 tokens. Kernels: moe_vec,
moe_batched, auto (the dispatcher's choice, named in notes) and dequant_matmul (dequantize the
used experts to bf16 + torch bf16 per-expert computation; it reads the used experts on the
host, so it is timed with plain launches). lowbit's kernels are timed as medians of CUDA-graph
replays (the routing included) divided by the calls a graph holds (graph_calls: whole rounds of the
weight rotation, up to about 500 us of work), after bench_dense.WARM_MS of replays, plain-launch
medians in plain_us. Projection weights rotate through three copies (over 256 MB), the routing
fixed: at few tokens the experts a call touches in the three copies fit L2 (60 MB; one token: 3 x
8 experts, 20 MB of IQ4_XS), as in ggml's test-backend-ops, which repeats one tensor; the layers'
weights alone exceed L2. Balanced random routing. Every timed output is checked (rel_err) against
a float64 reference on the exactly decoded weights over its first 64 tokens.

Usage: python benchmarks/bench_moe.py --out DIR [--ops moe_proj,moe_layer] [--tokens 1,8,...]
Writes DIR/moe-<date>-<commit>.csv and DIR/moe-<date>-<commit>-summary.txt.
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
import time
from collections.abc import Callable
from pathlib import Path

import lowbit
import torch
from bench_dense import warm_replays
from lowbit import QuantType
from lowbit.moe import moe_align, moe_batched, moe_block_size, moe_layer, moe_vec, select_moe_kernel

HEADER = "op,kernel,qtype,N,K,M,E,top_k,median_us,weight_GBps,tflops,rel_err,gpu,commit,date,notes,plain_us,graph_calls"
# ANCHORS.md, ggml MUL_MAT_ID E=128 top-8 N=768 K=2048 on the H200 (re-measured 2026-12-01), us
GGML_MOE_PROJ: dict[str, dict[int, float]] = {
    "iq2_xxs": {1: 7.4, 8: 26.2, 32: 149.9, 128: 282.4, 512: 323.9},
    "iq3_s": {1: 9.0, 8: 40.0, 32: 185.6, 128: 315.9, 512: 356.7},
    "iq4_xs": {1: 7.0, 8: 22.7, 32: 127.4, 128: 255.4, 512: 296.4},
}
PROJ_TARGET = {1: 1.5, 8: 1.5, 128: 3.0, 512: 3.0}  # issue 19: speed-up over ggml required
CHECK_TOKENS = 64


def commit_id() -> str:
    if os.environ.get("LOWBIT_COMMIT"):
        return os.environ["LOWBIT_COMMIT"]
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True).strip()
    except Exception:
        return "unknown"


def random_experts(qtype: QuantType, experts: int, n: int, k: int, gen: torch.Generator) -> torch.Tensor:
    """Random valid blocks made on the GPU (gigabytes in a second): random bytes with each block's
    fp16 scale set to a realistic |d| in [2^-9, 2^-7) of either sign (the types here keep d first)."""
    elems, nbytes = lowbit._types.block_layout(qtype)
    blocks = experts * n * (k // elems)
    raw = torch.randint(0, 256, (blocks, nbytes), dtype=torch.uint8, device="cuda", generator=gen)
    d = (torch.rand(blocks, device="cuda", generator=gen) * (2.0**-7 - 2.0**-9) + 2.0**-9).to(torch.float16)
    d = torch.where(torch.rand(blocks, device="cuda", generator=gen) < 0.5, -d, d)
    raw[:, 0:2] = d.view(torch.uint8).view(blocks, 2)
    return raw.view(experts, n, k // elems * nbytes)


def balanced_ids(tokens: int, experts: int, top_k: int, gen: torch.Generator) -> torch.Tensor:
    scores = torch.rand(tokens, experts, device="cuda", generator=gen)
    return scores.topk(top_k, dim=1).indices.to(torch.int32)


# A replay's own latency (the graph's launch and the last call's tail) is spread over the
# calls of the graph: the graph holds whole rounds of the weight rotation, as many as make up about
# GRAPH_WORK_US of plain-launch time and at most MAX_GRAPH_ROUNDS, so that a call's time is its
# time among back-to-back calls, as in bench_dense's graphs of 10-20 calls and in ggml's perf mode.
GRAPH_WORK_US = 500.0
MAX_GRAPH_ROUNDS = 8


def graph_rounds(plain_us: float, rotation: int) -> int:
    return max(1, min(MAX_GRAPH_ROUNDS, math.ceil(GRAPH_WORK_US / (max(plain_us, 1e-3) * rotation))))


def time_us(call: Callable[[int], object], rotation: int, graph: bool) -> tuple[float, float, int]:
    """(median per call with CUDA-graph replay or nan, plain-launch median, calls per graph), microseconds."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for r in range(rotation):
            call(r)
    stream.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    call(0)
    end.record()
    end.synchronize()
    once = max(time.perf_counter() - t0, 1e-6)
    reps = int(max(5, min(50, 3.0 / once)))
    plain = []
    for i in range(reps):
        start.record()
        call(i % rotation)
        end.record()
        end.synchronize()
        plain.append(start.elapsed_time(end) * 1e3)
    plain_med = statistics.median(plain)
    replay, calls = float("nan"), 0
    if graph:
        calls = rotation * graph_rounds(plain_med, rotation)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            for i in range(calls):
                call(i % rotation)
        # warmed as bench_dense's graphs: a row timed right after long calls otherwise runs on the
        # clock they left (benchmarks/NOTES.md, "bench_moe at 9312784 ... and a warm-up for its graphs")
        warm_replays(g)
        samples = []
        for _ in range(reps):
            start.record()
            g.replay()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e3 / calls)
        replay = statistics.median(samples)
        del g
    return replay, plain_med, calls


def dequant_matmul_proj(x, w, qtype, ids, top_k) -> torch.Tensor:
    """Dequantize the used experts to bf16, torch bf16 matmul per expert (host reads the ids)."""
    flat = ids.reshape(-1).long()
    out = torch.empty(flat.numel(), w.shape[1], dtype=torch.bfloat16, device=x.device)
    xb = x.to(torch.bfloat16)
    for e in torch.unique(flat).tolist():
        pairs = torch.nonzero(flat == e).squeeze(1)
        W = lowbit.dequantize(w[e], qtype, dtype=torch.bfloat16)
        out[pairs] = xb[pairs // top_k] @ W.T
    return out


def dequant_matmul_layer(x, w13, w2, weights, ids, t13, t2) -> torch.Tensor:
    flat = ids.reshape(-1).long()
    top_k = ids.shape[1]
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    xb = x.to(torch.bfloat16)
    inter = w13.shape[1] // 2
    for e in torch.unique(flat).tolist():
        pairs = torch.nonzero(flat == e).squeeze(1)
        tok = pairs // top_k
        h = xb[tok] @ lowbit.dequantize(w13[e], t13, dtype=torch.bfloat16).T
        a = torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]
        y = a @ lowbit.dequantize(w2[e], t2, dtype=torch.bfloat16).T
        out.index_add_(0, tok, y.float() * weights.reshape(-1)[pairs, None])
    return out.to(x.dtype)


def reference_proj(x, w, qtype, ids, top_k, tokens) -> torch.Tensor:
    flat = ids[:tokens].reshape(-1).long()
    out = torch.empty(flat.numel(), w.shape[1], dtype=torch.float64, device=x.device)
    for p, e in enumerate(flat.tolist()):
        out[p] = lowbit.dequantize(w[e], qtype).double() @ x[p // top_k].double()
    return out


def reference_layer(x, w13, w2, weights, ids, t13, t2, tokens) -> torch.Tensor:
    inter = w13.shape[1] // 2
    out = torch.zeros(tokens, x.shape[1], dtype=torch.float64, device=x.device)
    for t in range(tokens):
        for j, e in enumerate(ids[t].tolist()):
            h = lowbit.dequantize(w13[e], t13).double() @ x[t].double()
            a = torch.nn.functional.silu(h[:inter]) * h[inter:]
            out[t] += float(weights[t, j]) * (lowbit.dequantize(w2[e], t2).double() @ a)
    return out


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    o = out.double()
    return float(torch.linalg.vector_norm(o - ref) / torch.linalg.vector_norm(ref))


def bench_proj(writer, base, tokens_list, types, gen) -> list[dict]:
    rows = []
    E, top_k, N, K = 128, 8, 768, 2048
    for name in types:
        q = QuantType[name.upper()]
        ws = [random_experts(q, E, N, K, gen) for _ in range(3)]
        wbytes = ws[0].numel()
        for T in tokens_list:
            x = torch.randn(T, K, device="cuda", generator=gen).to(torch.bfloat16)
            ids = balanced_ids(T, E, top_k, gen)
            used = torch.unique(ids).numel()
            touched = wbytes * used / E
            check = min(T, CHECK_TOKENS)
            ref = reference_proj(x, ws[0], q, ids, top_k, check)
            block = moe_block_size(T * top_k, E)  # the grouped MMQ's token tile on Hopper

            def batched(r: int) -> torch.Tensor:
                return moe_batched(x, ws[r], q, moe_align(ids, E, block), top_k, T * top_k)  # noqa: B023

            # the dispatcher's choice for a layer of this projection's shape (its vector limit: pairs per expert)
            auto = select_moe_kernel(q, q, T, E, top_k, K, N, "cuda")
            calls = {
                "moe_vec": lambda r: moe_vec(x, ws[r], q, ids, top_k),  # noqa: B023
                "moe_batched": batched,
                "dequant_matmul": lambda r: dequant_matmul_proj(x, ws[r], q, ids, top_k),  # noqa: B023
            }
            calls["auto"] = calls[auto]
            int8_block = 64 if block == 48 else block  # 48 is a bf16 tile only
            if int8_block <= 64 and lowbit._C.mmq_int8_supported(int(q)):  # the grouped MMQ's int8 path

                def batched_int8(r: int) -> torch.Tensor:
                    routing = moe_align(ids, E, int8_block)  # noqa: B023
                    return moe_batched(x, ws[r], q, routing, top_k, T * top_k, math="int8")  # noqa: B023

                calls["moe_batched_int8"] = batched_int8
            for kernel, call in calls.items():
                out = call(0)
                err = rel_err(out[: check * top_k], ref)
                graph = kernel != "dequant_matmul"
                med, plain, graph_calls = time_us(call, len(ws), graph)
                t = med if graph else plain
                notes = ("auto=" + auto if kernel == "auto" else "") + ("" if graph else " plain launches, host sync")
                if kernel == "moe_batched_int8":
                    notes += f" block={int8_block}"
                elif kernel.startswith("moe_batched") or (kernel == "auto" and auto == "moe_batched"):
                    notes += f" block={block}"
                row = dict(
                    base,
                    op="moe_proj",
                    kernel=kernel,
                    qtype=name,
                    N=N,
                    K=K,
                    M=T,
                    E=E,
                    top_k=top_k,
                    median_us=f"{t:.1f}",
                    weight_GBps=f"{touched / t / 1e3:.0f}",
                    tflops=f"{2 * T * top_k * N * K / t / 1e6:.2f}",
                    rel_err=f"{err:.2e}",
                    notes=notes.strip(),
                    plain_us=f"{plain:.1f}",
                    graph_calls=graph_calls or "",
                )
                writer.writerow(row)
                rows.append(row)
                print(f"moe_proj {name} T={T} {kernel}: {t:.1f} us rel_err {err:.1e}", flush=True)
    return rows


LAYERS = [
    ("qwen3_30b_a3b", QuantType.IQ4_XS, QuantType.IQ4_XS, 128, 8, 2048, 768),
    ("deepseek_like", QuantType.IQ3_XXS, QuantType.IQ2_XS, 256, 8, 7168, 2048),
]


def bench_layer(writer, base, tokens_list, gen, vec_max_tokens: int) -> list[dict]:
    rows = []
    for label, t13, t2, E, top_k, H, inter in LAYERS:
        w13 = random_experts(t13, E, 2 * inter, H, gen)
        w2 = random_experts(t2, E, H, inter, gen)
        wbytes = w13.numel() + w2.numel()
        for T in tokens_list:
            x = torch.randn(T, H, device="cuda", generator=gen).to(torch.bfloat16)
            ids = balanced_ids(T, E, top_k, gen)
            weights = torch.softmax(torch.randn(T, top_k, device="cuda", generator=gen), 1)
            used = torch.unique(ids).numel()
            check = min(T, 16 if H > 4096 else CHECK_TOKENS)
            ref = reference_layer(x, w13, w2, weights, ids, t13, t2, check)
            auto = select_moe_kernel(t13, t2, T, E, top_k, H, inter, "cuda")
            kw = {"w13_type": t13, "w2_type": t2}
            calls = {
                "moe_vec": lambda r: moe_layer(x, w13, w2, weights, ids, route="moe_vec", **kw),  # noqa: B023
                "moe_batched": lambda r: moe_layer(x, w13, w2, weights, ids, route="moe_batched", **kw),  # noqa: B023
                "auto": lambda r: lowbit.fused_moe(x, w13, w2, weights, ids, **kw),  # noqa: B023
                "dequant_matmul": lambda r: dequant_matmul_layer(x, w13, w2, weights, ids, t13, t2),  # noqa: B023
            }
            if T > vec_max_tokens:  # one pass per pair: seconds per call at thousands of tokens
                del calls["moe_vec"]
            for kernel, call in calls.items():
                out = call(0)
                err = rel_err(out[:check], ref)
                graph = kernel != "dequant_matmul"
                med, plain, graph_calls = time_us(call, 1, graph)
                t = med if graph else plain
                notes = (
                    f"{label}" + (f" auto={auto}" if kernel == "auto" else "") + ("" if graph else " plain, host sync")
                )
                flops = 2 * T * top_k * (2 * inter * H + H * inter)
                row = dict(
                    base,
                    op="moe_layer",
                    kernel=kernel,
                    qtype=f"{t13.type_name}+{t2.type_name}",
                    N=f"{2 * inter}+{H}",
                    K=f"{H}+{inter}",
                    M=T,
                    E=E,
                    top_k=top_k,
                    median_us=f"{t:.1f}",
                    weight_GBps=f"{wbytes * used / E / t / 1e3:.0f}",
                    tflops=f"{flops / t / 1e6:.2f}",
                    rel_err=f"{err:.2e}",
                    notes=notes,
                    plain_us=f"{plain:.1f}",
                    graph_calls=graph_calls or "",
                )
                writer.writerow(row)
                rows.append(row)
                print(f"moe_layer {label} T={T} {kernel}: {t:.1f} us rel_err {err:.1e}", flush=True)
    return rows


def summary(proj: list[dict], layer: list[dict]) -> str:
    lines = ["moe_proj vs ggml MUL_MAT_ID (ANCHORS.md): speed-up = ggml / lowbit best of vec, batched, batched int8"]
    by = {(r["qtype"], int(r["M"]), r["kernel"]): float(r["median_us"]) for r in proj}
    for name, anchors in GGML_MOE_PROJ.items():
        for T, ggml in anchors.items():
            kernels = ("moe_vec", "moe_batched", "moe_batched_int8")
            best = min((by.get((name, T, k), float("inf")) for k in kernels), default=float("inf"))
            if best == float("inf"):
                continue
            need = PROJ_TARGET.get(T)
            verdict = "" if need is None else (" meets" if ggml / best >= need else " MISSES") + f" the {need}x target"
            lines.append(f"  {name} T={T}: ggml {ggml} us, lowbit {best:.1f} us, {ggml / best:.2f}x{verdict}")
    lines.append("moe_layer: batched/vec, auto regret, vs dequant_matmul")
    lay = {(r["notes"].split()[0], int(r["M"]), r["kernel"]): float(r["median_us"]) for r in layer}
    for label, *_ in LAYERS:
        for T in sorted({m for (lab, m, _) in lay if lab == label}):
            vec, bat = lay.get((label, T, "moe_vec")), lay.get((label, T, "moe_batched"))
            auto, dq = lay.get((label, T, "auto")), lay.get((label, T, "dequant_matmul"))
            if None in (bat, auto, dq):
                continue
            best = bat if vec is None else min(vec, bat)
            if vec is None:
                ratio = " vec not run"
            else:
                ratio = "" if T < 512 else f" batched/vec {vec / bat:.2f}x (target >= 5x)"
            vec_text = "-" if vec is None else f"{vec:.1f}"
            lines.append(
                f"  {label} T={T}: vec {vec_text} batched {bat:.1f} auto {auto:.1f} (regret {auto / best - 1:+.0%}) "
                f"dequant_matmul {dq:.1f} ({dq / best:.2f}x the best lowbit kernel){ratio}"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--ops", default="moe_proj,moe_layer")
    ap.add_argument("--proj-tokens", default="1,8,32,128,512")
    ap.add_argument("--layer-tokens", default="1,8,32,128,512,2048,4096")
    ap.add_argument("--types", default="iq2_xxs,iq3_s,iq4_xs")
    ap.add_argument("--vec-max-tokens", type=int, default=1 << 30, help="moe_layer: no moe_vec rows above this")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_moe.py needs a CUDA device")
    args.out.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(int.from_bytes(os.urandom(4), "little"))
    date = dt.date.today().strftime("%Y%m%d")
    commit = commit_id()
    base = {"gpu": torch.cuda.get_device_name().replace(",", " "), "commit": commit, "date": date}
    path = args.out / f"moe-{date}-{commit}.csv"
    with path.open("w", newline="", buffering=1) as f:  # line-buffered: a run cut short keeps its rows
        writer = csv.DictWriter(f, fieldnames=HEADER.split(","))
        writer.writeheader()
        ops = args.ops.split(",")
        proj = (
            bench_proj(writer, base, [int(t) for t in args.proj_tokens.split(",")], args.types.split(","), gen)
            if "moe_proj" in ops
            else []
        )
        layer_tokens = [int(t) for t in args.layer_tokens.split(",")]
        layer = bench_layer(writer, base, layer_tokens, gen, args.vec_max_tokens) if "moe_layer" in ops else []
    text = summary(proj, layer)
    (args.out / f"moe-{date}-{commit}-summary.txt").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
