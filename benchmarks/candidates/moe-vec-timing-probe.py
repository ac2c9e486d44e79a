"""Driver of moe-vec-timing-probe.patch.

Run from the repository root with the probe build first on PYTHONPATH:
    python3 benchmarks/candidates/moe-vec-timing-probe.py iq4_xs 8 > probe.txt
One moe_vec call at a time (plain launches, a sync after each) on bench_moe's moe_proj shape; the
probe build prints a line per team (block, warp, SM, items, globaltimer at the entry, after the
prologue, after each item, at the end). The routing's ids come first, on a line of their own.
"""

import sys

import torch

sys.path.insert(0, "benchmarks")  # bench_moe
from bench_moe import balanced_ids, random_experts  # noqa: E402
from lowbit import QuantType  # noqa: E402
from lowbit.moe import moe_vec  # noqa: E402


def main() -> None:
    qname, tokens = sys.argv[1], int(sys.argv[2])
    gen = torch.Generator(device="cuda").manual_seed(0)
    q = QuantType[qname.upper()]
    experts, top_k, n, k = 128, 8, 768, 2048
    ws = [random_experts(q, experts, n, k, gen) for _ in range(3)]
    x = torch.randn(tokens, k, device="cuda", generator=gen).to(torch.bfloat16)
    ids = balanced_ids(tokens, experts, top_k, gen)
    print("ids", ids.flatten().tolist(), flush=True)
    for i in range(7):
        moe_vec(x, ws[i % 3], q, ids, top_k)
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
