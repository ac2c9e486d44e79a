"""The H200 anchors of shared/docs/ANCHORS.md that lowbit's dense targets refer to (microseconds).

ggml commit d99724f, test-backend-ops perf, N=4096, K=14336, f32 activations (its time includes
ggml's q8_1 activation quantization).
"""

from __future__ import annotations

GGML_DENSE_4096x14336: dict[str, dict[int, float]] = {
    "iq1_s": {1: 18.5, 2: 18.8, 4: 25.4, 8: 40.5, 16: 43.2},
    "iq1_m": {1: 19.6, 2: 20.4, 4: 28.0, 8: 43.1, 16: 193.0},
    "iq2_xxs": {1: 17.4, 2: 18.7, 4: 27.2, 8: 39.5, 16: 43.4},
    "iq2_xs": {1: 19.3, 2: 20.5, 4: 28.2, 8: 43.1, 16: 46.9},
    "iq2_s": {1: 20.7, 2: 22.2, 4: 30.0, 8: 45.4, 16: 47.3},
    "iq3_xxs": {1: 19.7, 2: 21.2, 4: 28.2, 8: 42.4, 16: 46.3},
    "iq3_s": {1: 22.8, 2: 24.1, 4: 31.2, 8: 45.2, 16: 48.4},
    "iq4_nl": {1: 15.8, 2: 16.6, 4: 22.2, 8: 34.2, 16: 38.0},
    "iq4_xs": {1: 14.2, 2: 14.9, 4: 21.2, 8: 35.3, 16: 34.4},
    "mxfp4": {1: 19.4, 2: 20.3, 4: 26.7, 8: 39.8, 16: 42.1},
    "q8_0": {1: 23.0, 2: 25.1, 4: 29.5, 8: 45.8, 16: 49.0},
}
I_QUANTS = ("iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq4_nl", "iq4_xs")
COPY_TBPS = 4.20  # device-to-device copy, read + write bytes
DEQUANT_IQ4_XS_TARGET_US = 47.0
