#!/usr/bin/env python3
"""Error of int8 activations quantized with one scale per G values (G = 32, 256, K), as the int8
kernels quantize them (scale amax / 127, round half to even), in a product with float64 weights:
the cost, in accuracy, of coarser activation scales for an int8 tensor-core form whose sub-block
scaling would then be integer (benchmarks/NOTES.md, the T=8 lever). CPU only, numpy.

    python tools/activation_scale_error.py [--n 768] [--k 2048] [--tokens 64] [--seed 12345]
"""

from __future__ import annotations

import argparse

import numpy as np


def quantize_dequantize(x: np.ndarray, group: int) -> np.ndarray:
    """x [T, K] quantized to int8 per `group` consecutive values and decoded back."""
    runs = x.reshape(x.shape[0], -1, group)
    scale = np.abs(runs).max(axis=2, keepdims=True) / 127.0
    scale[scale == 0] = 1.0
    return (np.rint(runs / scale) * scale).reshape(x.shape)


def activations(kind: str, tokens: int, k: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "gaussian":
        return rng.standard_normal((tokens, k))
    if kind == "student_t3":
        return rng.standard_t(3, (tokens, k))
    # a few channels far above the rest, as in transformer activations
    x = rng.standard_normal((tokens, k))
    x[:, rng.choice(k, 8, replace=False)] *= 20.0
    return x


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=768)
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--seed", type=int, default=12345)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    w = rng.standard_normal((args.n, args.k))
    groups = (32, 256, args.k)
    print("activations, relative error of y = x W^T per scale group: " + ", ".join(f"{g}" for g in groups))
    for kind in ("gaussian", "student_t3", "outlier_channels"):
        x = activations(kind, args.tokens, args.k, rng)
        ref = x @ w.T
        errs = [np.linalg.norm(quantize_dequantize(x, g) @ w.T - ref) / np.linalg.norm(ref) for g in groups]
        print(f"{kind:17s} " + "  ".join(f"{e:.2e}" for e in errs))


if __name__ == "__main__":
    main()
