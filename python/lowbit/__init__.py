"""lowbit: linear and Mixture-of-Experts layers computed directly on low-bit weights."""

from __future__ import annotations

import os as _os

from . import compat, compat_moe, gguf, moe  # lowbit.compat, lowbit.gguf (which imports the gguf package lazily)
from ._api import capabilities, dequantize, fused_moe, linear, quantize, select_kernel
from ._types import GGUF_WEIGHT_TYPES, SPLIT_MX_TYPES, WEIGHT_TYPES, QuantType, as_quant_type

__version__ = "0.1.0"

#: CMAKE_PREFIX_PATH of the C++ package a pip install ships (find_package(lowbit); README, "C++").
cmake_prefix_path: str = _os.path.dirname(_os.path.abspath(__file__))

__all__ = [
    "GGUF_WEIGHT_TYPES",
    "QuantType",
    "SPLIT_MX_TYPES",
    "WEIGHT_TYPES",
    "as_quant_type",
    "capabilities",
    "cmake_prefix_path",
    "compat",
    "compat_moe",
    "dequantize",
    "fused_moe",
    "gguf",
    "linear",
    "moe",
    "quantize",
    "select_kernel",
]
