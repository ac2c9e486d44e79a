#!/usr/bin/env python3
"""Where a kernel's warps wait, from Nsight Compute's per-instruction source counters: the warp-state
samples of every SASS line, summed over the whole kernel, over named ranges of lines, and for the
lines that hold the most samples.

The input is the CSV of `ncu -i REPORT --page source --csv --print-source sass` for a report taken
with `--section SourceCounters` (benchmarks/device_run.sh `ncu-moe` writes one per case). Lines are
numbered from 0 in the kernel's order; the markers column names the lines between two line numbers
that a reader uses to cut the kernel into phases (the dependency wait ACQBULK, block barriers,
global loads and stores, exits).

    python3 tools/ncu_source.py OUT/ncu-moe-iq4_xs-t1-sass.csv [--top 12] [--step 60]
        [--range 0-165:before-wait --range 165-434:prologue ...]
"""

from __future__ import annotations

import argparse
import csv
from collections import Counter
from pathlib import Path

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
MARKERS = ("ACQBULK", "BAR.SYNC", "EXIT", "LDG", "STG", "CCTL", "SHFL")


def read_lines(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """(the stall columns, one dict per SASS line). The export's first row names the kernel, the
    second the columns."""
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    if len(rows) < 3 or SAMPLES not in rows[1]:
        raise SystemExit(f"{path}: not a source-page export with warp-state samples (--section SourceCounters)")
    header = rows[1]
    stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    return stalls, [dict(zip(header, r, strict=True)) for r in rows[2:]]


def count(line: dict[str, str], column: str) -> int:
    value = line.get(column, "") or "0"
    return int(value.replace(",", ""))


def stall_totals(lines: list[dict[str, str]], stalls: list[str]) -> Counter[str]:
    totals: Counter[str] = Counter()
    for line in lines:
        for s in stalls:
            totals[s.removeprefix("stall_")] += count(line, s)
    return totals


def describe(name: str, lines: list[dict[str, str]], stalls: list[str], whole: int) -> str:
    samples = sum(count(line, SAMPLES) for line in lines)
    executed = sum(count(line, EXECUTED) for line in lines)
    top = ", ".join(f"{k} {v}" for k, v in stall_totals(lines, stalls).most_common(3) if v)
    share = 100.0 * samples / whole if whole else 0.0
    return f"{name:>16}: {samples:6d} samples ({share:4.1f}%), {executed:9d} warp instructions; {top}"


def parse_range(text: str) -> tuple[int, int, str]:
    span, _, name = text.partition(":")
    first, _, last = span.partition("-")
    if not first.isdigit() or not last.isdigit() or int(last) <= int(first):
        raise argparse.ArgumentTypeError(f"--range {text!r}: expected FIRST-END[:NAME] with END > FIRST")
    return int(first), int(last), name or span


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--top", type=int, default=12, help="the lines with the most samples")
    ap.add_argument("--step", type=int, default=0, help="also sum every STEP lines, with their markers")
    ap.add_argument("--range", type=parse_range, action="append", default=[], help="FIRST-END[:NAME], END exclusive")
    args = ap.parse_args()
    stalls, lines = read_lines(args.csv)
    whole = sum(count(line, SAMPLES) for line in lines)
    print(describe("kernel", lines, stalls, whole))
    for first, end, name in args.range:
        print(describe(name, lines[first:end], stalls, whole))
    if args.step > 0:
        for first in range(0, len(lines), args.step):
            chunk = lines[first : first + args.step]
            marks = [ln["Source"].strip()[:40] for ln in chunk if any(m in ln["Source"] for m in MARKERS)]
            print(describe(f"{first}-{first + len(chunk)}", chunk, stalls, whole) + ("  | " if marks else ""), end="")
            print("; ".join(marks[:4]))
    print(f"lines with the most samples (of {whole}):")
    ranked = sorted(range(len(lines)), key=lambda i: count(lines[i], SAMPLES), reverse=True)
    for i in ranked[: args.top]:
        line = lines[i]
        reasons = Counter({s.removeprefix("stall_"): count(line, s) for s in stalls}).most_common(2)
        why = ", ".join(f"{k} {v}" for k, v in reasons if v)
        print(f"  {i:5d} {count(line, SAMPLES):5d}  {line['Source'].strip()[:60]:60s} {why}")


if __name__ == "__main__":
    main()
