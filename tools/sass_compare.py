"""Compare the SASS of every kernel between two builds of lowbit (e.g. a base commit and a change).

Each build's static library (or object files) is disassembled with `cuobjdump -sass`; per kernel
(by architecture and mangled name) the instructions are compared to the letter, immediates, masks,
selectors and branch targets included, except the offsets of global symbols in the constant banks
other than the parameters' (where the linker places a table says nothing of the kernel). Prints one
line per kernel: identical, differs (with instruction counts) or only in one build.

    python tools/sass_compare.py /tmp/base/build90/liblowbit.a build90/liblowbit.a
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

FUNCTION = re.compile(r"^\s*Function : (\S+)")
INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")
ARCH = re.compile(r"^\s*arch = (\S+)")
# c[0x0][...] holds the kernel's parameters and compares as is; the other banks hold the addresses
# of global symbols (codebooks), whose placement depends on what else the object holds
GLOBAL_CONSTANT = re.compile(r"c\[0x[1-9a-f]\]\[0x[0-9a-f]+\]")
# kernels in an anonymous namespace carry a hash of their source's path in the mangled name, so
# the same kernel built from two checkouts in different folders would not pair up
ANONYMOUS_NAMESPACE = re.compile(r"_GLOBAL__N__[0-9a-f]+_")


def kernels(path: str) -> dict[str, list[str]]:
    """(architecture, mangled kernel name) -> its instructions, global-symbol offsets normalized."""
    text = subprocess.run(["cuobjdump", "-sass", path], check=True, capture_output=True, text=True).stdout
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    arch = "?"
    for line in text.splitlines():
        a = ARCH.match(line)
        if a:
            arch = a.group(1)
            continue
        m = FUNCTION.match(line)
        if m:
            current = out.setdefault(f"{arch} {ANONYMOUS_NAMESPACE.sub('_GLOBAL__N__', m.group(1))}", [])
            current.clear()
            continue
        m = INSTRUCTION.search(line)
        if m and current is not None:
            current.append(GLOBAL_CONSTANT.sub("c[GLOBAL]", m.group(1)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base", help="library or object of the base build")
    ap.add_argument("new", help="library or object of the new build")
    ap.add_argument("--quiet", action="store_true", help="print only kernels that are not identical")
    args = ap.parse_args()
    base, new = kernels(args.base), kernels(args.new)
    differ = 0
    for name in sorted(set(base) | set(new)):
        if name not in new or name not in base:
            differ += 1
            print(f"only in {'base' if name in base else 'new'}: {name}")
        elif base[name] != new[name]:
            differ += 1
            print(f"differs ({len(base[name])} -> {len(new[name])} instructions): {name}")
        elif not args.quiet:
            print(f"identical ({len(new[name])} instructions): {name}")
    print(f"{len(set(base) | set(new))} kernels, {differ} not identical")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
