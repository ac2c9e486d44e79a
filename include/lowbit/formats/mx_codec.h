// Encoding side of the MX formats (OCP Microscaling v1.0): the shared E8M0 exponent of a block
// and round-to-nearest-even, saturating E4M3 / E2M1 element codes. Host and device code.
#pragma once

#include <cstdint>

#include "lowbit/formats/common.h"

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

namespace lowbit {

// How an MX block's shared E8M0 exponent is chosen from its largest magnitude amax.
enum class ScaleRule : int32_t {
  kOcpFloor = 0,  // OCP MX v1.0: floor(log2(amax)) - emax_elem; what npu_dynamic_mx_quant does
  kRoundUp = 1,   // ceil(log2(amax / max_elem)) with the quotient in float: never saturates;
                  // the rule of Ascend's MoE routing quantization (RoundScale)
};

// An element format with `kMantBits` mantissa bits and exponent bias `kBias`, finite values
// up to kMaxValue (code kMaxCode), sign in bit kSignBit.
struct E4M3Spec {
  static constexpr int kMantBits = 3, kBias = 7, kEmax = 8, kSignBit = 0x80;
  static constexpr uint32_t kMaxCode = 0x7E;
  static constexpr float kMaxValue = 448.0f;
};
struct E2M1Spec {
  static constexpr int kMantBits = 1, kBias = 1, kEmax = 2, kSignBit = 0x8;
  static constexpr uint32_t kMaxCode = 0x7;
  static constexpr float kMaxValue = 6.0f;
};

// 2^n as a float for n in [-149, 127], exact.
LOWBIT_HD float exp2_int(int n) {
  return n >= -126 ? bits_to_float(static_cast<uint32_t>(n + 127) << 23) : bits_to_float(1u << (n + 149));
}

// floor(log2(a)) for finite a > 0, exact (from the bits, no libm).
LOWBIT_HD int floor_log2(float a) {
  const uint32_t u = float_to_bits(a) & 0x7FFFFFFFu;
  const int e = static_cast<int>(u >> 23);
  if (e != 0) return e - 127;
  int top = 31;  // subnormal: value = m * 2^-149
  while (!((u >> top) & 1u)) --top;
  return top - 149;
}

LOWBIT_HD bool is_power_of_two(float a) {
  const uint32_t u = float_to_bits(a) & 0x7FFFFFFFu;
  return (u >> 23) != 0 ? (u & 0x7FFFFFu) == 0 : (u & (u - 1u)) == 0;
}

LOWBIT_HD float round_half_even(float v) {
#if defined(__CUDA_ARCH__)
  return rintf(v);
#else
  return std::nearbyint(v);
#endif
}

// E8M0 code of a block's shared scale; 0xFF (NaN) when amax is NaN or infinite, 0 for amax 0.
template <class Spec>
LOWBIT_HD uint8_t mx_scale_code(float amax, ScaleRule rule) {
  if (!(amax <= 3.402823466e38f)) return 0xFF;
  if (amax == 0.0f) return 0;
  int e;
  if (rule == ScaleRule::kOcpFloor) {
    e = floor_log2(amax) - Spec::kEmax;
  } else {
    const float s = amax / Spec::kMaxValue;
    e = s == 0.0f ? -127 : floor_log2(s) + (is_power_of_two(s) ? 0 : 1);
  }
  e = e < -127 ? -127 : (e > 127 ? 127 : e);
  return static_cast<uint8_t>(e + 127);
}

// Nearest-even element code of v (already divided by the block scale), saturating at +-max.
// A value that rounds to zero is encoded as +0.
template <class Spec>
LOWBIT_HD uint32_t encode_minifloat(float v) {
  const bool negative = v < 0.0f;
  const float a = negative ? -v : v;
  uint32_t code;
  if (!(a < Spec::kMaxValue)) {
    code = Spec::kMaxCode;
  } else if (a < exp2_int(1 - Spec::kBias)) {  // subnormal range: multiples of the smallest step
    code = static_cast<uint32_t>(round_half_even(a * exp2_int(Spec::kBias - 1 + Spec::kMantBits)));
  } else {
    int e = floor_log2(a);
    uint32_t m = static_cast<uint32_t>(round_half_even(a * exp2_int(Spec::kMantBits - e)));
    if (m == (2u << Spec::kMantBits)) {
      ++e;
      m >>= 1;
    }
    code = (static_cast<uint32_t>(e + Spec::kBias) << Spec::kMantBits) | (m - (1u << Spec::kMantBits));
    if (code > Spec::kMaxCode) code = Spec::kMaxCode;
  }
  return code == 0 ? 0u : (code | (negative ? static_cast<uint32_t>(Spec::kSignBit) : 0u));
}

// Element codes of x scaled by the block's E8M0 code (zero codes for a NaN scale).
template <class Spec>
LOWBIT_HD uint32_t encode_mx_element(float x, uint8_t scale_code) {
  if (scale_code == 0xFF) return 0;
  return encode_minifloat<Spec>(x * exp2_int(127 - static_cast<int>(scale_code)));
}

}  // namespace lowbit
