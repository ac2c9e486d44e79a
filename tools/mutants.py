#!/usr/bin/env python3
"""Mutation check: do the CPU-side tests catch realistic one-line bugs?

Copies the repository's tracked files (the working tree, or a commit with --rev) into a scratch
directory, builds it CPU-only (LOWBIT_CUDA=OFF, the torch extension included, no benchmarks),
checks that the tests pass there, then for each mutant below: applies its one string replacement
(asserted to occur exactly once), rebuilds what the file feeds, runs the whole GoogleTest binary
and the pytest files that guard the file, and restores the file. A mutant survives when every test
still passes. Prints each mutant's fate and the time taken; exits 1 if any survived.

On demand, not in CI: about 5 minutes on two shared cores (the scratch build 1.5-3 minutes, then
4-30 s a mutant, most of it rebuilding). Result on 2026-12-01: at 81f033a, before the tests were
mended, 16 of 22 killed; the six survivors all in cpu::fused_moe / cpu::linear (last expert
dropped, activation on the up half, first slot's weight for every slot, expert 0's or row 0's
split scales for all, GELU with erf(v / 2)). At f8b3031, with the mended tests: 22 of 22
killed, 275 s. At 3ac41e4 (the IQ3_XXS scale mutant moved to sub_scale, where 3d80f6e put the
scale; two mutants of the MoE vector kernel's cursor added): 24 of 24 killed, 313 s. At e7d37de:
24 of 24 killed, 494 s.

    python3 tools/mutants.py                  # the working tree's code and tests
    python3 tools/mutants.py --rev 81f033a    # another commit's code and tests
    python3 tools/mutants.py --only q5_0 moe  # mutants whose names contain these words
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

DECODE_TESTS = ("tests/python/test_decode_gguf.py", "tests/python/test_mx_codec.py")
MOE_TESTS = ("tests/python/test_fused_moe.py",)


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    old: str
    new: str
    pytest_files: tuple[str, ...] = ()  # besides the whole GoogleTest binary
    pytest_k: str = ""


MUTANTS: list[Mutant] = [
    # --- format decoders (include/lowbit/formats) ---
    Mutant(
        "q5_0: the fifth bit of the wrong weight",
        "include/lowbit/formats/legacy.h",
        "const uint32_t high = qh >> (8 * g);",
        "const uint32_t high = qh >> (4 * g);",
        DECODE_TESTS,
        "q5_0",
    ),
    Mutant(
        "iq2 (xxs, xs, s): sub-block scale without the half",
        "include/lowbit/formats/iq2.h",
        "return d * (0.5f + static_cast<float>(s4)) * 0.25f;",
        "return d * static_cast<float>(s4) * 0.25f;",
        DECODE_TESTS,
        "iq2",
    ),
    Mutant(
        "iq3_xxs: the sub-block scale a factor two off",
        "include/lowbit/formats/iq3.h",
        "(0.5f + static_cast<float>(aux >> 28)) * 0.5f;",
        "(0.5f + static_cast<float>(aux >> 28)) * 0.25f;",
        DECODE_TESTS,
        "iq3_xxs",
    ),
    Mutant(
        "iq3_s: odd scale 2s + 1 read as 2s",
        "include/lowbit/formats/iq3.h",
        "static_cast<float>(1 + 2 * static_cast<int>(s4));",
        "static_cast<float>(2 * static_cast<int>(s4));",
        DECODE_TESTS,
        "iq3_s",
    ),
    Mutant(
        "iq4_xs: sub-block scale offset 31 instead of 32",
        "include/lowbit/formats/iq4.h",
        "static_cast<float>(static_cast<int>(ls) - 32);\n  }\n\n  // d * (ls - 32) of 32-weight sub-block ib",
        "static_cast<float>(static_cast<int>(ls) - 31);\n  }\n\n  // d * (ls - 32) of 32-weight sub-block ib",
        DECODE_TESTS,
        "iq4_xs",
    ),
    Mutant(
        "iq1_s: delta sign from bit 14",
        "include/lowbit/formats/iq1.h",
        "(qh & 0x8000u) != 0, dl);",
        "(qh & 0x4000u) != 0, dl);",
        DECODE_TESTS,
        "iq1_s",
    ),
    Mutant(
        "iq1_m: delta signs of the two half-bytes swapped",
        "include/lowbit/formats/iq1.h",
        "const bool delta_negative = (qh & ((l & 1) ? 0x80u : 0x08u)) != 0;",
        "const bool delta_negative = (qh & ((l & 1) ? 0x08u : 0x80u)) != 0;",
        DECODE_TESTS,
        "iq1_m",
    ),
    Mutant(
        "mxfp4_split: doubled codebook without the half scale",
        "include/lowbit/formats/mx.h",
        "r.scale = e8m0_to_float(b.split_scale) * 0.5f;",
        "r.scale = e8m0_to_float(b.split_scale);",
        DECODE_TESTS,
        "mxfp4 or e2m1 or split",
    ),
    Mutant(
        "e4m3: subnormals scaled by 2^-8",
        "include/lowbit/formats/common.h",
        "const float mag = static_cast<float>(man) * bits_to_float(0x3B000000u);  // man * 2^-9",
        "const float mag = static_cast<float>(man) * bits_to_float(0x3B800000u);  // man * 2^-9",
        DECODE_TESTS,
        "e4m3 or mxfp8",
    ),
    # --- the C++ reference (src/cpu_linear.cpp): reachable from GoogleTest only ---
    Mutant(
        "cpu::fused_moe: the last expert dropped",
        "src/cpu_linear.cpp",
        "for (int64_t e = 0; e < E; ++e) {",
        "for (int64_t e = 0; e < E - 1; ++e) {",
    ),
    Mutant(
        "cpu::fused_moe: activation on the up half",
        "src/cpu_linear.cpp",
        "a[r] = activate(L.activation, h[r]) * h[I + r];",
        "a[r] = h[r] * activate(L.activation, h[I + r]);",
    ),
    Mutant(
        "cpu::fused_moe: expert_begin ignored",
        "src/cpu_linear.cpp",
        "const int64_t global = L.expert_begin + e;",
        "const int64_t global = e;",
    ),
    Mutant(
        "cpu::fused_moe: every slot weighted by the first slot's weight",
        "src/cpu_linear.cpp",
        "const double weight = topk_weights[t * top_k + j];",
        "const double weight = topk_weights[t * top_k];",
    ),
    Mutant(
        "cpu::fused_moe: split scales of expert 0 for every expert",
        "src/cpu_linear.cpp",
        "one.scales = w.scales ? w.scales + e * w.scale_expert_stride : nullptr;",
        "one.scales = w.scales;",
    ),
    Mutant(
        "cpu::activate: GELU with erf(v / 2)",
        "src/cpu_linear.cpp",
        "return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));",
        "return 0.5 * v * (1.0 + std::erf(v / 2.0));",
    ),
    Mutant(
        "cpu::linear: bias dropped",
        "src/cpu_linear.cpp",
        "acc[i] = s + (bias ? static_cast<double>(bias[j]) : 0.0);",
        "acc[i] = s;",
    ),
    Mutant(
        "cpu::linear: split scales of row 0 for every row",
        "src/cpu_linear.cpp",
        "one.scales = w.scales ? w.scales + j * w.scale_row_stride : nullptr;",
        "one.scales = w.scales;",
    ),
    # --- the torch composite (csrc/torch/composite.cpp): the ops' MoE ---
    Mutant(
        "composite: the last expert dropped",
        "csrc/torch/composite.cpp",
        "for (int64_t e = 0; e < p.local_experts; ++e) {",
        "for (int64_t e = 0; e + 1 < p.local_experts; ++e) {",
        MOE_TESTS,
    ),
    Mutant(
        "composite: activation on the up half",
        "csrc/torch/composite.cpp",
        "apply_activation(h.narrow(1, 0, p.intermediate), p.activation) * h.narrow(1, p.intermediate, p.intermediate);",
        "h.narrow(1, 0, p.intermediate) * apply_activation(h.narrow(1, p.intermediate, p.intermediate), p.activation);",
        MOE_TESTS,
    ),
    Mutant(
        "composite: expert_begin ignored",
        "csrc/torch/composite.cpp",
        "(ids == p.expert_begin + e).nonzero();",
        "(ids == e).nonzero();",
        MOE_TESTS,
    ),
    Mutant(
        "composite: gelu_tanh runs the exact GELU",
        "csrc/torch/composite.cpp",
        'return at::gelu(v, "tanh");',
        'return at::gelu(v, "none");',
        MOE_TESTS,
    ),
    Mutant(
        "composite: a token's experts overwrite instead of adding",
        "csrc/torch/composite.cpp",
        "out.index_add_(0, tokens, y * scale);",
        "out.index_copy_(0, tokens, y * scale);",
        MOE_TESTS,
    ),
    # --- the MoE vector kernel's item walk (csrc/cuda/mmvq/lane_pairs_layout.h; GoogleTest) ---
    Mutant(
        "lane cursor: one pair on per wrap, however many the step passes",
        "csrc/cuda/mmvq/lane_pairs_layout.h",
        "const uint32_t q = c.group / per_pair;",
        "const uint32_t q = 1;",
    ),
    Mutant(
        "lane cursor: the activation row left behind when the pair moves on",
        "csrc/cuda/mmvq/lane_pairs_layout.h",
        "c.x_row = static_cast<int>(c.pair / divisor) - first_x_row;",
        "c.x_row = static_cast<int>(c.pair) - first_x_row;",
    ),
]


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, text=True, capture_output=True)


def make_scratch(work: Path, rev: str | None) -> Path:
    src = work / "src"
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    if rev:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    else:
        files = run(["git", "ls-files", "-z"], ROOT).stdout.split("\0")
        for f in filter(None, files):
            if (ROOT / f).is_file():
                (src / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / f, src / f)
    # every source newer than anything a reused build directory holds (copy2 and git archive keep
    # old times, under which objects of an earlier run's last mutant would count as up to date)
    now = time.time()
    for p in src.rglob("*"):
        if p.is_file():
            os.utime(p, (now, now))
    return src


def build(src: Path, build_dir: Path, targets: list[str], jobs: int) -> subprocess.CompletedProcess[str]:
    cmd = ["cmake", "--build", str(build_dir), "-j", str(jobs)]
    for t in targets:
        cmd += ["--target", t]
    return run(cmd, src)


def tests_pass(src: Path, build_dir: Path, m: Mutant | None) -> tuple[bool, str]:
    """(all passed, what failed). None: every test the mutants use (the unmutated baseline)."""
    gtest = run([str(build_dir / "lowbit_tests"), "--gtest_brief=1"], src)
    if gtest.returncode != 0:
        return False, "GoogleTest"
    files = sorted({f for x in MUTANTS for f in x.pytest_files}) if m is None else list(m.pytest_files)
    files = [f for f in files if (src / f).exists()]
    if not files:
        return True, ""
    env = dict(os.environ, PYTHONPATH=str(src / "python"))
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *files]
    if m is not None and m.pytest_k:
        cmd += ["-k", m.pytest_k]
    py = run(cmd, src, env)
    if py.returncode == 5:  # nothing selected: nothing guards this mutant
        return True, ""
    if py.returncode != 0:
        return False, "pytest"
    return True, ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rev", help="mutate this commit's tree instead of the working tree")
    ap.add_argument("--work", type=Path, help="scratch directory (default: a new one under /tmp)")
    ap.add_argument("--only", nargs="*", default=[], help="run the mutants whose names contain any of these")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()

    start = time.monotonic()
    work = args.work or Path(tempfile.mkdtemp(prefix="lowbit-mutants-"))
    src = make_scratch(work, args.rev)
    build_dir = work / "build"
    configure = run(
        [
            "cmake", "-S", str(src), "-B", str(build_dir), "-G", "Ninja",
            "-DLOWBIT_CUDA=OFF", "-DLOWBIT_BUILD_PYTHON=ON", "-DLOWBIT_BUILD_BENCHMARKS=OFF",
            f"-DPython_EXECUTABLE={sys.executable}",
        ],
        src,
    )  # fmt: skip
    if configure.returncode != 0:
        print(configure.stdout[-3000:], configure.stderr[-3000:])
        return 2
    base = build(src, build_dir, [], args.jobs)
    if base.returncode != 0:
        print(base.stdout[-3000:])
        return 2
    ok, failed = tests_pass(src, build_dir, None)
    if not ok:
        print(f"the unmutated copy fails its tests ({failed}): fix that first")
        return 2
    print(f"scratch copy {work} ({args.rev or 'working tree'}) built and green in {time.monotonic() - start:.0f} s")

    chosen = [m for m in MUTANTS if not args.only or any(w in m.name for w in args.only)]
    survivors = []
    for m in chosen:
        t0 = time.monotonic()
        path = src / m.path
        original = path.read_text()
        count = original.count(m.old)
        assert count == 1, f"{m.name}: {m.path} holds the text to replace {count} times, not once"
        path.write_text(original.replace(m.old, m.new))
        try:
            targets = ["lowbit_tests"] + (["_C"] if m.pytest_files else [])
            built = build(src, build_dir, targets, args.jobs)
            if built.returncode != 0:
                fate = "does not compile (fix the mutant)"
                survivors.append(m)
            elif "Building" not in built.stdout:  # a stale binary would judge another mutant
                fate = "not rebuilt (stale build)"
                survivors.append(m)
            else:
                ok, failed = tests_pass(src, build_dir, m)
                fate = "SURVIVED" if ok else f"killed by {failed}"
                if ok:
                    survivors.append(m)
        finally:
            path.write_text(original)
        print(f"{time.monotonic() - t0:6.0f} s  {fate:<34} {m.name}  ({m.path})", flush=True)

    total = time.monotonic() - start
    print(f"{len(chosen) - len(survivors)} of {len(chosen)} mutants killed, {len(survivors)} survived; {total:.0f} s")
    for m in survivors:
        print(f"  survived: {m.name} ({m.path})")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
