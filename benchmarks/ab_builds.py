#!/usr/bin/env python3
"""Kernel times of two or more builds of lowbit on one GPU, for deciding whether a change helps.

Builds differ in compiled code, so each runs in its own process; the processes alternate (every
build once per pass) so that clock and thermal drift fall on all of them alike, and each cell
reports the fastest pass. --op mmvq / mmq: dense MMVQ / MMQ of N x K, bench_dense's timing
(CUDA-graph replays over weights rotating through >= 256 MB, fresh random bf16 activations, the
output checked against float64). --op moe_vec / moe_batched: the vector / batched MoE projection
of bench_moe (E = 128, top-8, N = 768 and K = 2048 unless --n / --k say otherwise, balanced random
routing at the planner's routing block, graph replays over three weight copies, checked against
float64); --m then counts tokens.
--math sets mmq's and moe_batched's arithmetic (auto, bf16, int8).

    python benchmarks/ab_builds.py --build new=python --build base=ab-base/python \
        --types iq3_xxs,iq2_xxs --m 1,2 [--op mmvq] [--passes 2]

A build is NAME=DIR[,KEY=VALUE...]: DIR holds the `lowbit` package with its compiled _C
(benchmarks/device_run.sh `build` makes ./python's, `build-base` makes ab-base/python's from a tree
at another commit), the KEY=VALUE pairs go into its process's environment (to time a knob that a
build reads from the environment: --build on=python,KNOB=1 --build off=python,KNOB=0).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def time_one_build(types: list[str], ms: list[int], n: int, k: int, op: str = "mmvq", math: str = "auto") -> None:
    """Child process: prints one JSON line {"type", "m", "us", "rel_err"} per case (op mmvq or mmq)."""
    import torch

    sys.path.insert(0, str(HERE))
    import lowbit
    from bench_dense import RotatingWeight, time_calls
    from lowbit.testing import rel_err

    dev = torch.device("cuda")
    for name in types:
        q = lowbit.as_quant_type(name)
        rw = RotatingWeight.make(q, n, k, seed=1)  # the same weights in every build
        w64 = lowbit.dequantize(rw.w0, q, scales=rw.s0).double()

        def run(x: torch.Tensor, r: int, rw=rw, q=q) -> torch.Tensor:
            if op == "mmvq":
                return rw.mmvq(x, r)
            i = r % len(rw.ws)
            return torch.ops.lowbit.mmq(x, rw.ws[i], int(q), scales=rw.ss[i], math=math)

        for m in ms:
            x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            err = rel_err(run(x, 0), x.double() @ w64.T)
            us, _ = time_calls(lambda r, x=x: run(x, r), 20 if op == "mmvq" else 10, 50)
            print(json.dumps({"type": name, "m": m, "us": us, "rel_err": err}), flush=True)
        del rw, w64  # this type's weights, before the next type's
        torch.cuda.empty_cache()


# Types whose blocks start with their fp16 scale: bench_moe's random_experts makes valid experts of
# these alone. The MoE ops' shape is bench_moe's projection (N = 768, K = 2048) unless --n / --k
# are given (e.g. K = 1280: an odd number of 256-blocks, the byte-reading instances).
MOE_VEC_TYPES = {"iq1_s", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq4_nl", "iq4_xs", "q5_0", "q8_0"}


def time_moe(
    types: list[str], tokens: list[int], op: str = "moe_vec", math: str = "auto", n: int = 768, k: int = 2048
) -> None:
    """Child process: the vector MoE projection (op moe_vec) or the batched one at the planner's
    routing block (op moe_batched), one JSON line per case as time_one_build."""
    import torch

    sys.path.insert(0, str(HERE))
    from bench_moe import balanced_ids, random_experts, reference_proj, time_us
    from lowbit import QuantType
    from lowbit.moe import moe_align, moe_batched, moe_block_size, moe_vec
    from lowbit.testing import rel_err

    experts, top_k = 128, 8
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)  # the same weights and routing in every build
    for name in types:
        q = QuantType[name.upper()]
        ws = [random_experts(q, experts, n, k, gen) for _ in range(3)]
        for t in tokens:
            x = torch.randn(t, k, device="cuda", generator=gen).to(torch.bfloat16)
            ids = balanced_ids(t, experts, top_k, gen)
            check = min(t, 64)
            ref = reference_proj(x, ws[0], q, ids, top_k, check)
            block = moe_block_size(t * top_k, experts)

            def run(r: int, x=x, ids=ids, ws=ws, q=q, t=t, block=block) -> torch.Tensor:
                if op == "moe_vec":
                    return moe_vec(x, ws[r], q, ids, top_k)
                return moe_batched(x, ws[r], q, moe_align(ids, experts, block), top_k, t * top_k, math=math)

            err = rel_err(run(0)[: check * top_k], ref)
            us, _, _ = time_us(run, len(ws), True)
            print(json.dumps({"type": name, "m": t, "us": us, "rel_err": err}), flush=True)
        del ws
        torch.cuda.empty_cache()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", action="append", default=[], metavar="NAME=DIR", help="a build to time (two or more)")
    ap.add_argument("--op", choices=("mmvq", "mmq", "moe_vec", "moe_batched"), default="mmvq")
    ap.add_argument("--math", choices=("auto", "bf16", "int8"), default="auto", help="mmq / moe_batched arithmetic")
    ap.add_argument("--types", required=True, help="comma-separated weight types")
    ap.add_argument("--m", default="1,2", help="comma-separated token counts")
    ap.add_argument("--n", type=int, default=None, help="default 4096 (mmvq, mmq) or 768 (MoE ops)")
    ap.add_argument("--k", type=int, default=None, help="default 14336 (mmvq, mmq) or 2048 (MoE ops)")
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument(
        "--unchecked",
        action="store_true",
        help="time builds whose results are wrong on purpose (a bound, e.g. a decode without its bank conflicts)",
    )
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    types = [t for t in args.types.split(",") if t]
    moe = args.op in ("moe_vec", "moe_batched")
    if moe and not set(types) <= MOE_VEC_TYPES:
        ap.error(
            f"--types: --op {args.op} takes {', '.join(sorted(MOE_VEC_TYPES))} (bench_moe's random experts), "
            f"got {args.types!r}"
        )
    ms = [int(v) for v in args.m.split(",") if v]
    if args.n is None:
        args.n = 768 if moe else 4096
    if args.k is None:
        args.k = 2048 if moe else 14336
    if args.child:
        if moe:
            time_moe(types, ms, args.op, args.math, args.n, args.k)
        else:
            time_one_build(types, ms, args.n, args.k, args.op, args.math)
        return 0

    builds: list[tuple[str, Path, dict[str, str]]] = []
    for spec in args.build:
        name, sep, rest = spec.partition("=")
        path, *settings = rest.split(",")
        pairs = [item.partition("=") for item in settings]
        extra = {key: value for key, _, value in pairs}
        if not sep or not name or not (Path(path) / "lowbit").is_dir() or not all(k and eq for k, eq, _ in pairs):
            ap.error(f"--build must be NAME=DIR[,KEY=VALUE...] with DIR/lowbit present, got {spec!r}")
        builds.append((name, Path(path).resolve(), extra))
    if len(builds) < 2:
        ap.error("--build: give at least two builds to compare")
    if args.passes < 1:
        ap.error("--passes must be at least 1")

    best: dict[tuple[str, str, int], float] = {}
    for p in range(args.passes):
        for name, path, extra in builds:
            env = dict(os.environ) | extra
            inherited = [v for v in env.get("PYTHONPATH", "").split(os.pathsep) if v]
            env["PYTHONPATH"] = os.pathsep.join([str(path), *inherited])  # this build's lowbit first
            cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--op", args.op, "--math", args.math]
            cmd += ["--types", args.types, "--m", args.m]
            cmd += ["--n", str(args.n), "--k", str(args.k)]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if out.returncode != 0:
                print(f"build {name} pass {p}: exit {out.returncode}\n{out.stderr[-2000:]}", file=sys.stderr)
                return 1
            for line in out.stdout.splitlines():
                if not line.startswith("{"):
                    continue
                r = json.loads(line)
                if not r["rel_err"] < 2e-2 and not args.unchecked:
                    print(f"build {name}: {r['type']} M={r['m']} rel_err {r['rel_err']:.3g}", file=sys.stderr)
                    return 1
                key = (name, r["type"], r["m"])
                best[key] = min(best.get(key, math.inf), r["us"])

    shape = f"E=128 top-8 N={args.n} K={args.k}, M = tokens" if moe else f"N={args.n} K={args.k}"
    math_note = f", math={args.math}" if args.op in ("mmq", "moe_batched") else ""
    unchecked = ", results unchecked" if args.unchecked else ""
    print(f"{args.op} us, {shape}{math_note}, fastest of {args.passes} alternating passes{unchecked}")
    print(f"{'type':<12}{'M':>3}" + "".join(f"{name:>12}" for name, _, _ in builds))
    for t in types:
        for m in ms:
            print(f"{t:<12}{m:>3}" + "".join(f"{best[(name, t, m)]:>12.2f}" for name, _, _ in builds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
