"""Runs one MMVQ or MMQ configuration a few times, for a profiler (ncu) to capture:
    ncu -k regex:mmvq --launch-skip 3 --launch-count 1 python3 benchmarks/profile_mmvq.py iq4_xs 1 int8
    ncu -k regex:mmq_wgmma --launch-skip 3 --launch-count 1 python3 benchmarks/profile_mmvq.py iq4_xs 128 mmq
Arguments: type, M, math (auto | bf16 | int8 for MMVQ; mmq, mmq-bf16 or mmq-int8 for
torch.ops.lowbit.mmq with math auto, bf16 or int8); N = 4096, K = 14336, bf16 activations. Each
MMQ call launches its activation prologue, the tile kernel and (split K) the reduction, so
`-k regex:mmq_ --launch-skip 9 --launch-count 3` captures the fourth call's three kernels."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

# after PYTHONPATH: a build named there (a candidate's package) comes first
sys.path.append(str(Path(__file__).resolve().parents[1] / "python"))
import lowbit  # noqa: E402
from lowbit.testing import random_weight  # noqa: E402


def main() -> int:
    qtype = lowbit.as_quant_type(sys.argv[1])
    m, math = int(sys.argv[2]), sys.argv[3]
    dev = torch.device("cuda")
    # a different weight each launch (cold in L2, as in the benchmark's rotation)
    weights = [random_weight(qtype, 4096, 14336, np.random.default_rng(i), device=dev) for i in range(5)]
    x = torch.randn(m, 14336, device=dev, dtype=torch.bfloat16)
    for w, s in weights:
        if math.startswith("mmq"):
            mmq_math = math.partition("-")[2] or "auto"
            torch.ops.lowbit.mmq(x, w, int(qtype), scales=s, math=mmq_math)
        else:
            torch.ops.lowbit.mmvq(x, w, int(qtype), scales=s, math=math)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
