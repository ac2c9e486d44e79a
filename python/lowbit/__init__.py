"""lowbit: linear and Mixture-of-Experts layers computed directly on low-bit weights."""

from __future__ import annotations

from . import compat_moe, moe
from ._api import capabilities, dequantize, fused_moe, linear, quantize, select_kernel
from ._types import GGUF_WEIGHT_TYPES, SPLIT_MX_TYPES, WEIGHT_TYPES, QuantType, as_quant_type

__version__ = "0.1.0"

__all__ = [
    "GGUF_WEIGHT_TYPES",
    "QuantType",
    "SPLIT_MX_TYPES",
    "WEIGHT_TYPES",
    "as_quant_type",
    "capabilities",
    "compat_moe",
    "dequantize",
    "fused_moe",
    "linear",
    "moe",
    "quantize",
    "select_kernel",
]
