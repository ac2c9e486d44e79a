"""Test helpers: lowbit.testing's generators plus a per-test fresh seed."""

from __future__ import annotations

import importlib
import os
import secrets
from types import ModuleType

import pytest
import torch
from lowbit.testing import (  # noqa: F401  (re-exported for the tests)
    BLOCK,
    IQ1M_SCALES_OFFSET,
    fp16_any_finite,
    fp16_realistic,
    random_blocks,
    random_weight,
    rel_err,
    set_iq1m_scale,
)


def fresh_seed() -> int:
    """A new seed per call (LOWBIT_TEST_SEED pins it to reproduce a failure); printed for the log."""
    pinned = os.environ.get("LOWBIT_TEST_SEED")
    seed = int(pinned) if pinned else secrets.randbits(32)
    print(f"seed={seed}")
    return seed


NO_CUDA = "needs a CUDA device"
# Test devices: "cuda" is always a parameter, skipped with its reason where no GPU exists (a
# variant that cannot run shows in the summary as skipped, never vanishes).
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA))]


def gguf_module(name: str = "gguf.quants") -> ModuleType:
    """gguf-py (the reference decoders and quantizers). Missing, a test skips with the reason; in CI
    (CI or LOWBIT_REQUIRE_GGUF set, as scripts/test.sh does) it fails instead, so that the
    strongest checks never turn into a skip line under a green run."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        why = f"gguf-py is missing ({e}); pip install gguf==0.19.0"
        if os.environ.get("LOWBIT_REQUIRE_GGUF") or os.environ.get("CI"):
            pytest.fail(f"{why}: the GGUF reference tests must run in CI", pytrace=False)
        pytest.skip(why)
