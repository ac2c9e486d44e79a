from __future__ import annotations

import numpy as np
import pytest
import torch
from _helpers import fresh_seed


@pytest.fixture
def rng() -> np.random.Generator:
    """A fresh random generator per test; its seed is printed (LOWBIT_TEST_SEED reproduces it)."""
    return np.random.default_rng(fresh_seed())


@pytest.fixture
def trng() -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(fresh_seed())
    return g
