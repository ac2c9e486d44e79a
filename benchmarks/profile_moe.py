#!/usr/bin/env python3
"""Where the time of a MoE call goes: the kernels of CUDA-graph replays, their mean durations, a
call's time over the replays and the span of one call (first kernel start to last kernel end), from
the profiler's device trace.

The shapes are those of benchmarks/bench_moe.py: op=moe_proj (E=128, top-8, N=768, K=2048) and
op=moe_layer (Qwen3-30B-A3B, IQ4_XS). Balanced random routing; weights rotate through three
copies so that each call reads its experts from memory, not from L2.

Usage: python benchmarks/profile_moe.py [--types iq2_xxs,iq4_xs] [--tokens 1,8] [--ops moe_proj,moe_layer]
           [--kernels moe_vec,moe_batched]
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from collections.abc import Callable

import torch
from bench_dense import warm_and_capture
from bench_moe import balanced_ids, random_experts
from lowbit import QuantType
from lowbit.moe import moe_align, moe_batched, moe_block_size, moe_layer, moe_vec

REPLAYS = 20
ROTATION = 3
ROUNDS = 8  # rounds of the rotation per graph, as bench_moe.py's graphs of short calls hold


def profile(label: str, call: Callable[[int], object]) -> None:
    g = warm_and_capture(lambda r: call(r % ROTATION), ROTATION * ROUNDS)
    g.replay()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(REPLAYS):
            g.replay()
        torch.cuda.synchronize()
    kernels = sorted(
        (e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA and e.time_range.elapsed_us() > 0),
        key=lambda e: e.time_range.start,
    )
    calls = REPLAYS * ROTATION * ROUNDS
    if not kernels or len(kernels) % calls != 0:
        print(f"{label}: {len(kernels)} device events for {calls} calls; no breakdown", flush=True)
        return
    per_call = len(kernels) // calls
    durations: dict[int, list[float]] = defaultdict(list)
    names: dict[int, str] = {}
    spans, gaps = [], []
    for c in range(calls):
        chunk = kernels[c * per_call : (c + 1) * per_call]
        spans.append(chunk[-1].time_range.end - chunk[0].time_range.start)
        if c + 1 < calls:
            gaps.append(kernels[(c + 1) * per_call].time_range.start - chunk[-1].time_range.end)
        for i, e in enumerate(chunk):
            durations[i].append(e.time_range.elapsed_us())
            names[i] = e.name
    span = statistics.median(spans)
    gap = statistics.median(gaps) if gaps else 0.0
    # kernels that launch early (programmatic launches) start before the call before has ended, so
    # a call's cost is the replays' whole span over the calls, not one call's span plus its gap
    whole = (kernels[-1].time_range.end - kernels[0].time_range.start) / calls
    print(f"{label}: {whole:.1f} us per call over the replays (one call's span {span:.1f}, gap to the next {gap:.1f})")
    for i in range(per_call):
        print(f"    {statistics.median(durations[i]):7.2f} us  {names[i][:110]}")
    print(flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--types", default="iq2_xxs,iq4_xs")
    ap.add_argument("--tokens", default="1,8")
    ap.add_argument("--ops", default="moe_proj,moe_layer")
    ap.add_argument("--kernels", default="moe_vec")
    args = ap.parse_args()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(20261201)
    tokens = [int(t) for t in args.tokens.split(",")]
    kernels = args.kernels.split(",")
    if "moe_proj" in args.ops:
        E, top_k, N, K = 128, 8, 768, 2048
        for name in args.types.split(","):
            q = QuantType[name.upper()]
            ws = [random_experts(q, E, N, K, gen) for _ in range(ROTATION)]
            for T in tokens:
                x = torch.randn(T, K, device="cuda", generator=gen).to(torch.bfloat16)
                ids = balanced_ids(T, E, top_k, gen)
                block = moe_block_size(T * top_k, E)

                def batched(r: int) -> torch.Tensor:
                    return moe_batched(x, ws[r], q, moe_align(ids, E, block), top_k, T * top_k)  # noqa: B023

                calls = {"moe_vec": lambda r: moe_vec(x, ws[r], q, ids, top_k), "moe_batched": batched}  # noqa: B023
                for k in kernels:
                    profile(f"moe_proj {name} T={T} {k}", calls[k])
    if "moe_layer" in args.ops:
        E, top_k, H, inter, q = 128, 8, 2048, 768, QuantType.IQ4_XS
        w13 = random_experts(q, E, 2 * inter, H, gen)
        w2 = random_experts(q, E, H, inter, gen)
        for T in tokens:
            x = torch.randn(T, H, device="cuda", generator=gen).to(torch.bfloat16)
            ids = balanced_ids(T, E, top_k, gen)
            weights = torch.softmax(torch.randn(T, top_k, device="cuda", generator=gen), 1)
            for k in kernels:

                def call(r: int, route: str = k) -> torch.Tensor:
                    return moe_layer(x, w13, w2, weights, ids, route=route, w13_type=q, w2_type=q)  # noqa: B023

                profile(f"moe_layer qwen3 iq4_xs T={T} {k}", call)


if __name__ == "__main__":
    main()
