"""Test helpers: lowbit.testing's generators plus a per-test fresh seed."""

from __future__ import annotations

import os
import secrets

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
