// Q8_0 and Q5_0, the classic GGUF block formats that sit beside I-quants in real files (and as
// the partner type of mixed MoE layers), and Q8_1, the activation format of ggml's integer paths.
#pragma once

#include <cstddef>

#include "lowbit/formats/traits.h"

namespace lowbit {

struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block is 34 bytes");

struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];   // fifth bit of weight j at bit j
  uint8_t qs[16];  // low nibble: weight j; high nibble: weight j + 16
};
static_assert(sizeof(BlockQ5_0) == 22, "Q5_0 block is 22 bytes");

// Activation format only: d = amax / 127, s = d * sum(qs).
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_1) == 36, "Q8_1 block is 36 bytes");

namespace detail {
// int8 bytes -> magnitudes (|-128| = 128 fits a byte) and sign bytes.
LOWBIT_HD void int8_word(uint32_t w, uint32_t& mag, uint32_t& neg) {
  neg = w & 0x80808080u;
  const uint32_t ones = neg >> 7;
  mag = (w ^ (ones * 0xFFu)) + ones;  // two's complement per byte; cannot carry across bytes
}
}  // namespace detail

template <>
struct FormatTraits<QuantType::Q8_0> : BlockFormat<QuantType::Q8_0, BlockQ8_0, 32, /*kAlign=*/2, Codebook::kNone>,
                                       Int8Form<I8Order::kContiguous, 32> {
  using Group = MagnitudeGroup;
  static constexpr const char* kName = "q8_0";

  LOWBIT_HD static Group decode_group(BlockRef b, int g, const Codebooks&) {
    const uint8_t* qs = b.bytes + offsetof(Block, qs) + 8 * g;
    MagnitudeGroup r;
    detail::int8_word(load_u32<2>(qs), r.mag[0], r.neg[0]);
    detail::int8_word(load_u32<2>(qs + 4), r.mag[1], r.neg[1]);
    r.scale = fp16_to_float(static_cast<uint16_t>(load_u16<2>(b.bytes)));
    return r;
  }

  LOWBIT_HD static Int8Group decode_i8(BlockRef b, int g, const Codebooks&) {
    const uint8_t* qs = b.bytes + offsetof(Block, qs) + 8 * g;
    return Int8Group{{load_u32<2>(qs), load_u32<2>(qs + 4)}};
  }

  LOWBIT_HD static float scale_i8(BlockRef b, int) {
    return fp16_to_float(static_cast<uint16_t>(load_u16<2>(b.bytes)));
  }
};

namespace detail {
// Four 5-bit codes u (bytes) -> magnitudes and signs of u - 16.
LOWBIT_HD void offset16_word(uint32_t u, uint32_t& mag, uint32_t& neg) {
  neg = (~u & 0x10101010u) << 3;                                           // u < 16
  const uint32_t below = (0x90909090u - (u & 0x0F0F0F0Fu)) ^ 0x80808080u;  // 16 - u, no borrows
  const uint32_t take_below = expand_sign_bytes(neg);
  mag = (below & take_below) | (u & 0x0F0F0F0Fu & ~take_below);
}
}  // namespace detail

template <>
struct FormatTraits<QuantType::Q5_0> : BlockFormat<QuantType::Q5_0, BlockQ5_0, 32, /*kAlign=*/2, Codebook::kNone>,
                                       Int8Form<I8Order::kContiguous, 32> {
  using Group = MagnitudeGroup;
  static constexpr const char* kName = "q5_0";

  LOWBIT_HD static Group decode_group(BlockRef b, int g, const Codebooks&) {
    const uint32_t qh = load_u32<2>(b.bytes + offsetof(Block, qh));
    const uint8_t* p = b.bytes + offsetof(Block, qs) + 8 * (g & 1);
    const int shift = 4 * (g >> 1);
    const uint32_t high = qh >> (8 * g);  // fifth bit of weight e is bit e
    MagnitudeGroup r;
    const uint32_t u0 = ((load_u32<2>(p) >> shift) & 0x0F0F0F0Fu) | (spread_sign_bits4(high) >> 3);
    const uint32_t u1 = ((load_u32<2>(p + 4) >> shift) & 0x0F0F0F0Fu) | (spread_sign_bits4(high >> 4) >> 3);
    detail::offset16_word(u0, r.mag[0], r.neg[0]);
    detail::offset16_word(u1, r.mag[1], r.neg[1]);
    r.scale = fp16_to_float(static_cast<uint16_t>(load_u16<2>(b.bytes)));
    return r;
  }

  LOWBIT_HD static Int8Group decode_i8(BlockRef b, int g, const Codebooks& cb) {
    return int8_from_magnitudes(decode_group(b, g, cb));
  }

  LOWBIT_HD static float scale_i8(BlockRef b, int) {
    return fp16_to_float(static_cast<uint16_t>(load_u16<2>(b.bytes)));
  }
};

}  // namespace lowbit
