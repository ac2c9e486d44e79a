// IQ1_S and IQ1_M: ternary I-quants. A group of eight weights is one row of a {-1, 0, 1} codebook
// shifted by a +-1/8 delta and scaled: w = dl * (grid + delta). The decoded group holds the exact
// integers 8 * grid + 8 * delta (odd values in [-9, 9]) with scale dl / 8; dividing a float by 8 is
// exact here, so the product rounds exactly as ggml's dl * (grid + delta) does.
#pragma once

#include <cstddef>

#include "lowbit/formats/codebooks.h"
#include "lowbit/formats/traits.h"

namespace lowbit {

struct BlockIq1s {
  uint16_t d;
  uint8_t qs[32];  // low 8 bits of the grid index per 8 weights
  uint16_t qh[8];  // per 32 weights: 4 x 3 high index bits, 3-bit scale (bits 12..14), delta sign (bit 15)
};
static_assert(sizeof(BlockIq1s) == 50, "IQ1_S block is 50 bytes");

struct BlockIq1m {
  uint8_t qs[32];     // low 8 bits of the grid index per 8 weights
  uint8_t qh[16];     // per 8 weights a nibble: 3 high index bits + delta sign
  uint8_t scales[8];  // four uint16: 3-bit scales per 16 weights; top nibbles form the fp16 scale
};
static_assert(sizeof(BlockIq1m) == 56, "IQ1_M block is 56 bytes");

namespace detail {
// Grid row bytes are int8 -1/0/1. Returns magnitudes and signs of 8 * grid + (delta_negative ? -1 : 1).
LOWBIT_HD void ternary_word(uint32_t w, bool delta_negative, uint32_t& mag, uint32_t& neg) {
  const uint32_t c = ((w & 0x7F7F7F7Fu) + 0x01010101u) ^ (w & 0x80808080u);  // grid + 1 per byte
  const uint32_t sel = nibble_selector(c);
  // value by c = 0, 1, 2: delta +1 -> -7, 1, 9; delta -1 -> -9, -1, 7
  mag = byte_perm(delta_negative ? 0x00070109u : 0x00090107u, 0, sel);
  neg = byte_perm(delta_negative ? 0x00008080u : 0x00000080u, 0, sel);
}

LOWBIT_HD MagnitudeGroup ternary_group(uint64_t grid_row, bool delta_negative, float dl) {
  MagnitudeGroup r;
  ternary_word(static_cast<uint32_t>(grid_row), delta_negative, r.mag[0], r.neg[0]);
  ternary_word(static_cast<uint32_t>(grid_row >> 32), delta_negative, r.mag[1], r.neg[1]);
  r.scale = dl * 0.125f;
  return r;
}

// int8 8 * grid + delta from a packed row (pack_ternary_row): nibble c = grid + 1 selects from
// {-7, 1, 9} (delta +1/8) or {-9, -1, 7} (delta -1/8).
LOWBIT_HD Int8Group ternary_i8(uint32_t packed, bool delta_negative) {
  const uint32_t values = delta_negative ? 0x0007FFF7u : 0x000901F9u;
  return Int8Group{{byte_perm(values, 0, packed), byte_perm(values, 0, packed >> 16)}};
}
}  // namespace detail

template <>
struct FormatTraits<QuantType::IQ1_S> : BlockFormat<QuantType::IQ1_S, BlockIq1s, 256, /*kAlign=*/2, Codebook::kIq1s>,
                                        Int8Form<I8Order::kContiguous, 32> {
  using Group = MagnitudeGroup;
  static constexpr const char* kName = "iq1_s";

  LOWBIT_HD static Group decode_group(BlockRef b, int g, const Codebooks& cb) {
    const int ib = g >> 2, l = g & 3;
    const uint32_t qh = load_u16<2>(b.bytes + offsetof(Block, qh) + 2 * ib);
    const uint32_t index = b.bytes[offsetof(Block, qs) + g] | (((qh >> (3 * l)) & 7u) << 8);
    const float d = fp16_to_float(static_cast<uint16_t>(load_u16<2>(b.bytes)));
    const float dl = d * static_cast<float>(2 * static_cast<int>((qh >> 12) & 7u) + 1);
    return detail::ternary_group(cb.iq1s_grid[index], (qh & 0x8000u) != 0, dl);
  }

  LOWBIT_HD static Int8Group decode_i8(BlockRef b, int g, const Codebooks& cb) {
    const uint32_t qh = load_u16<2>(b.bytes + offsetof(Block, qh) + 2 * (g >> 2));
    return group_i8(b.bytes[offsetof(Block, qs) + g], qh, g & 3, cb);
  }

  LOWBIT_HD static float scale_i8(BlockRef b, int s) {
    return sub_scale(load_u16<2>(b.bytes), load_u16<2>(b.bytes + offsetof(Block, qh) + 2 * s));
  }

  // Group l of a sub-block from its low index byte and the sub-block's qh word, and the
  // sub-block's scale from d's bits and that word (the block reads and the dp4a MMVQ's word read,
  // csrc/cuda/mmvq/lane_reads_iq1.h).
  LOWBIT_HD static Int8Group group_i8(uint32_t low, uint32_t qh, int l, const Codebooks& cb) {
    return detail::ternary_i8(cb.iq1s_packed[low | (((qh >> (3 * l)) & 7u) << 8)], (qh & 0x8000u) != 0);
  }
  LOWBIT_HD static float sub_scale(uint32_t d_bits, uint32_t qh) {
    const float d = fp16_to_float(static_cast<uint16_t>(d_bits));
    return d * static_cast<float>(2 * static_cast<int>((qh >> 12) & 7u) + 1) * 0.125f;
  }
};

template <>
struct FormatTraits<QuantType::IQ1_M> : BlockFormat<QuantType::IQ1_M, BlockIq1m, 256, /*kAlign=*/8, Codebook::kIq1s>,
                                        Int8Form<I8Order::kContiguous, 16> {
  using Group = MagnitudeGroup;
  static constexpr const char* kName = "iq1_m";

  // The fp16 super-block scale is scattered over the top nibbles of the four scale words
  // (read as one 64-bit word: the scales sit 8-byte aligned).
  LOWBIT_HD static float super_scale(uint64_t words) {
    const uint32_t s0 = static_cast<uint32_t>(words) & 0xFFFFu, s1 = static_cast<uint32_t>(words >> 16) & 0xFFFFu;
    const uint32_t s2 = static_cast<uint32_t>(words >> 32) & 0xFFFFu, s3 = static_cast<uint32_t>(words >> 48);
    const uint32_t bits = (s0 >> 12) | ((s1 >> 8) & 0x00F0u) | ((s2 >> 4) & 0x0F00u) | (s3 & 0xF000u);
    return fp16_to_float(static_cast<uint16_t>(bits));
  }

  LOWBIT_HD static Group decode_group(BlockRef b, int g, const Codebooks& cb) {
    const int ib = g >> 2, l = g & 3;
    const uint64_t words = load_u64<kAlign>(b.bytes + offsetof(Block, scales));
    const uint32_t sc = static_cast<uint32_t>(words >> (16 * (ib >> 1))) & 0xFFFFu;
    const float dl =
        super_scale(words) * static_cast<float>(2 * static_cast<int>((sc >> (6 * (ib & 1) + 3 * (l >> 1))) & 7u) + 1);
    const uint32_t qh = b.bytes[offsetof(Block, qh) + 2 * ib + (l >> 1)];
    const uint32_t high = (l & 1) ? (qh << 4) : (qh << 8);
    const uint32_t index = b.bytes[offsetof(Block, qs) + g] | (high & 0x700u);
    const bool delta_negative = (qh & ((l & 1) ? 0x80u : 0x08u)) != 0;
    return detail::ternary_group(cb.iq1s_grid[index], delta_negative, dl);
  }

  LOWBIT_HD static Int8Group decode_i8(BlockRef b, int g, const Codebooks& cb) {
    return group_i8(b.bytes[offsetof(Block, qs) + g], b.bytes[offsetof(Block, qh) + 2 * (g >> 2) + ((g & 3) >> 1)],
                    g & 3, cb);
  }

  LOWBIT_HD static float scale_i8(BlockRef b, int s) {  // s: 16-weight scale group
    const uint64_t words = load_u64<kAlign>(b.bytes + offsetof(Block, scales));
    const uint32_t s3 = static_cast<uint32_t>(words >> (16 * (s >> 2) + 6 * ((s >> 1) & 1) + 3 * (s & 1))) & 7u;
    return sub_scale(super_scale(words), s3);
  }

  // Group l of a sub-block from its low index byte and the qh byte of its pair of groups, and a
  // 16-weight scale from the super-block scale and its 3-bit field (block and word reads share them;
  // csrc/cuda/mmvq/lane_reads_iq1.h).
  LOWBIT_HD static Int8Group group_i8(uint32_t low, uint32_t qh, int l, const Codebooks& cb) {
    const uint32_t high = (l & 1) ? (qh << 4) : (qh << 8);
    return detail::ternary_i8(cb.iq1s_packed[low | (high & 0x700u)], (qh & ((l & 1) ? 0x80u : 0x08u)) != 0);
  }
  LOWBIT_HD static float sub_scale(float super, uint32_t s3) {
    return super * static_cast<float>(2 * static_cast<int>(s3) + 1) * 0.125f;
  }
};

}  // namespace lowbit
