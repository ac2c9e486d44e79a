"""Instruction counts of the loops in compiled kernels, for comparing a change before timing it.

Compiles one CUDA source of this tree (and optionally the same source of another tree) for sm_90a
and prints, for each kernel whose mangled name matches --kernel, its instruction count and the
length of every backward branch (a loop body, innermost first as they appear). On this project's
kernels the loop lengths predicted the lane kernel's speed where the change removed address
arithmetic (benchmarks/NOTES.md, 7b0fc23..2bfc9cc), not always elsewhere: time what looks better.

    python tools/sass_loops.py csrc/cuda/instances/kernels_iq4.cu --kernel 'mmvq_lane_kernel.*bfloat16' \\
        --base ab-base

Needs nvcc, and cuobjdump on PATH or in $CUOBJDUMP (pip: nvidia-cuda-cuobjdump) with nvdisasm on
PATH (pip: nvidia-cuda-nvdisasm; both install into site-packages/nvidia/cu13/bin).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);")
BRANCH = re.compile(r"\bBRA\s+(0x[0-9a-f]+)")


def compile_cubin(tree: Path, source: str, out: Path) -> None:
    cmd = ["nvcc", "-std=c++17", "-O3", "--expt-relaxed-constexpr", "-gencode=arch=compute_90a,code=sm_90a"]
    cmd += [f"-I{tree / 'include'}", f"-I{tree / 'csrc'}", "-cubin", "-o", str(out), str(tree / source)]
    subprocess.run(cmd, check=True)


def kernel_loops(cuobjdump: str, cubin: Path, pattern: re.Pattern[str]) -> dict[str, tuple[int, list[int]]]:
    """Mangled kernel name -> (instructions, loop lengths) for kernels matching `pattern`."""
    sass = subprocess.run([cuobjdump, "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout
    result: dict[str, tuple[int, list[int]]] = {}
    name = ""
    for line in sass.splitlines():
        if "Function :" in line:
            name = line.split("Function :")[1].strip()
            if pattern.search(name):
                result[name] = (0, [])
            continue
        m = LINE.search(line)
        if not m or name not in result:
            continue
        count, loops = result[name]
        address = int(m.group(1), 16)
        target = BRANCH.search(m.group(2))
        if target and int(target.group(1), 16) < address:
            loops.append((address - int(target.group(1), 16)) // 16 + 1)
        result[name] = (count + 1, loops)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", help="a CUDA source of the tree, e.g. csrc/cuda/instances/kernels_iq4.cu")
    ap.add_argument("--kernel", default="mmvq_lane_kernel", help="regex on the mangled kernel names")
    ap.add_argument("--base", type=Path, help="another tree (e.g. ab-base) to compare with")
    args = ap.parse_args()
    cuobjdump = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
    if not cuobjdump:
        ap.error("cuobjdump not found: put it on PATH or set CUOBJDUMP")
    pattern = re.compile(args.kernel)
    with tempfile.TemporaryDirectory() as tmp:
        trees = [("this", ROOT)] + ([("base", args.base.resolve())] if args.base else [])
        tables = {}
        for label, tree in trees:
            cubin = Path(tmp) / f"{label}.cubin"
            compile_cubin(tree, args.source, cubin)
            tables[label] = kernel_loops(cuobjdump, cubin, pattern)
    for name in sorted(tables["this"]):
        count, loops = tables["this"][name]
        line = f"{count:6d} {loops}"
        if "base" in tables and name in tables["base"]:
            base_count, base_loops = tables["base"][name]
            line += f"   base {base_count:6d} {base_loops}"
        print(f"{line}   {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
