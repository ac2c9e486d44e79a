"""Driver of moe-vec-timing-probe.patch.

Run from the repository root with the probe build first on PYTHONPATH:
    python3 benchmarks/candidates/moe-vec-timing-probe.py iq4_xs 8 [--graph] > probe.txt
moe_vec calls on bench_moe's moe_proj shape: one at a time (plain launches, a sync after each), or
with --graph back to back in CUDA-graph replays as bench_moe times them (programmatic launches:
a call's blocks enter while the call before drains). The probe build prints a line per team (block,
warp, SM, items, globaltimer at the entry, after the prologue, after each item, at the end); the
routing's ids come first, on a line of their own. Launches are told apart by their entry times.
"""

import sys

import torch

sys.path.insert(0, "benchmarks")  # bench_moe
from bench_moe import balanced_ids, random_experts  # noqa: E402
from lowbit import QuantType  # noqa: E402
from lowbit.moe import moe_vec  # noqa: E402


def enlarge_printf_buffer(megabytes: int = 256) -> None:
    """The device's printf buffer (1 MB by default) drops the lines of back-to-back graph replays;
    it can only grow before the first kernel that prints, so this runs first (not yet run on the
    GPU: where no runtime library loads, a warning says so and the default stays)."""
    import ctypes
    import glob
    import os

    names = ["libcudart.so.13", "libcudart.so.12", "libcudart.so"]
    names += glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "*", "lib", "libcudart.so*"))
    for name in names:
        try:
            cudart = ctypes.CDLL(name)
        except OSError:
            continue
        # cudaLimitPrintfFifoSize is 0x01
        if cudart.cudaDeviceSetLimit(ctypes.c_int(1), ctypes.c_size_t(megabytes << 20)) == 0:
            return
    print("warning: the printf buffer keeps its default size; graph replays may drop lines", file=sys.stderr)


def main() -> None:
    qname, tokens = sys.argv[1], int(sys.argv[2])
    enlarge_printf_buffer()
    gen = torch.Generator(device="cuda").manual_seed(0)
    q = QuantType[qname.upper()]
    experts, top_k, n, k = 128, 8, 768, 2048
    ws = [random_experts(q, experts, n, k, gen) for _ in range(3)]
    x = torch.randn(tokens, k, device="cuda", generator=gen).to(torch.bfloat16)
    ids = balanced_ids(tokens, experts, top_k, gen)
    print("ids", ids.flatten().tolist(), flush=True)
    if "--graph" in sys.argv[3:]:
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            for i in range(3):
                moe_vec(x, ws[i], q, ids, top_k)
        stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for i in range(6):
                moe_vec(x, ws[i % 3], q, ids, top_k)
        for _ in range(2):
            graph.replay()
        torch.cuda.synchronize()
        return
    for i in range(7):
        moe_vec(x, ws[i % 3], q, ids, top_k)
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
