// IQ4_NL and IQ4_XS: 4-bit non-linear quants. Each nibble indexes a 16-entry int8 codebook; in
// each 32-weight run the low nibble of byte j is weight j and the high nibble weight j + 16.
#pragma once

#include <cstddef>

#include "lowbit/formats/codebooks.h"
#include "lowbit/formats/traits.h"

namespace lowbit {

struct BlockIq4nl {
  uint16_t d;
  uint8_t qs[16];
};
static_assert(sizeof(BlockIq4nl) == 18, "IQ4_NL block is 18 bytes");

struct BlockIq4xs {
  uint16_t d;
  uint16_t scales_h;    // 2 high bits of each 6-bit sub-block scale
  uint8_t scales_l[4];  // 4 low bits of each 6-bit sub-block scale
  uint8_t qs[128];
};
static_assert(sizeof(BlockIq4xs) == 136, "IQ4_XS block is 136 bytes");

namespace detail {
// Codebook magnitudes split into two byte_perm tables: entries 0..7 (all negative) and 8..15.
inline constexpr uint8_t kIq4nlMag[16] = {
    codebook::abs_i8(codebook::kKvaluesIq4nl[0]),  codebook::abs_i8(codebook::kKvaluesIq4nl[1]),
    codebook::abs_i8(codebook::kKvaluesIq4nl[2]),  codebook::abs_i8(codebook::kKvaluesIq4nl[3]),
    codebook::abs_i8(codebook::kKvaluesIq4nl[4]),  codebook::abs_i8(codebook::kKvaluesIq4nl[5]),
    codebook::abs_i8(codebook::kKvaluesIq4nl[6]),  codebook::abs_i8(codebook::kKvaluesIq4nl[7]),
    codebook::abs_i8(codebook::kKvaluesIq4nl[8]),  codebook::abs_i8(codebook::kKvaluesIq4nl[9]),
    codebook::abs_i8(codebook::kKvaluesIq4nl[10]), codebook::abs_i8(codebook::kKvaluesIq4nl[11]),
    codebook::abs_i8(codebook::kKvaluesIq4nl[12]), codebook::abs_i8(codebook::kKvaluesIq4nl[13]),
    codebook::abs_i8(codebook::kKvaluesIq4nl[14]), codebook::abs_i8(codebook::kKvaluesIq4nl[15])};
inline constexpr uint32_t kIq4nlMagLo0 = codebook::table_word(kIq4nlMag, 0);
inline constexpr uint32_t kIq4nlMagLo1 = codebook::table_word(kIq4nlMag, 1);
inline constexpr uint32_t kIq4nlMagHi0 = codebook::table_word(kIq4nlMag, 2);
inline constexpr uint32_t kIq4nlMagHi1 = codebook::table_word(kIq4nlMag, 3);

// Four nibbles (one per byte) -> codebook magnitudes and signs. Codes 0..7 are the negative half.
LOWBIT_HD void iq4nl_word(uint32_t nibbles, uint32_t& mag, uint32_t& neg) {
  const uint32_t sel = nibble_selector(nibbles);
  const uint32_t lo = byte_perm(kIq4nlMagLo0, kIq4nlMagLo1, sel);
  const uint32_t hi = byte_perm(kIq4nlMagHi0, kIq4nlMagHi1, sel);
  const uint32_t upper = expand_sign_bytes(nibbles << 4);  // 0xFF where code >= 8
  mag = (hi & upper) | (lo & ~upper);
  neg = ~(nibbles << 4) & 0x80808080u;
}

// The codebook as signed bytes (Codebooks::iq4nl_i8).
LOWBIT_HD Int8Group iq4nl_i8(uint32_t w, const Codebooks& cb) {
  return nibble_lookup_i8(w, cb.iq4nl_i8[0], cb.iq4nl_i8[1], cb.iq4nl_i8[2], cb.iq4nl_i8[3]);
}

// Group g of a 32-weight nibble run at `qs`: weights 8g..8g+7 (bytes 8(g&1).., nibble g>>1).
template <int kAlign>
LOWBIT_HD void nibble_run_words(const uint8_t* qs, int g, uint32_t& w0, uint32_t& w1) {
  const uint8_t* p = qs + 8 * (g & 1);
  const int shift = 4 * (g >> 1);
  w0 = (load_u32<kAlign>(p) >> shift) & 0x0F0F0F0Fu;
  w1 = (load_u32<kAlign>(p + 4) >> shift) & 0x0F0F0F0Fu;
}

template <int kAlign>
LOWBIT_HD MagnitudeGroup iq4nl_group(const uint8_t* qs, int g, float scale) {
  uint32_t w0, w1;
  nibble_run_words<kAlign>(qs, g, w0, w1);
  MagnitudeGroup r;
  iq4nl_word(w0, r.mag[0], r.neg[0]);
  iq4nl_word(w1, r.mag[1], r.neg[1]);
  r.scale = scale;
  return r;
}
}  // namespace detail

template <>
struct FormatTraits<QuantType::IQ4_NL> : BlockFormat<QuantType::IQ4_NL, BlockIq4nl, 32, /*kAlign=*/2, Codebook::kNone>,
                                         Int8Form<I8Order::kNibbleInterleaved, 32> {
  using Group = MagnitudeGroup;
  static constexpr const char* kName = "iq4_nl";

  LOWBIT_HD static Group decode_group(BlockRef b, int g, const Codebooks&) {
    const float d = fp16_to_float(static_cast<uint16_t>(load_u16<2>(b.bytes)));
    return detail::iq4nl_group<2>(b.bytes + offsetof(Block, qs), g, d);
  }

  // the eight nibbles of int8 group g
  LOWBIT_HD static uint32_t code_word(BlockRef b, int g) { return load_u32<2>(b.bytes + offsetof(Block, qs) + 4 * g); }

  LOWBIT_HD static Int8Group decode_i8(BlockRef b, int g, const Codebooks& cb) {
    return detail::iq4nl_i8(code_word(b, g), cb);
  }

  LOWBIT_HD static float scale_i8(BlockRef b, int) {
    return fp16_to_float(static_cast<uint16_t>(load_u16<2>(b.bytes)));
  }
};

template <>
struct FormatTraits<QuantType::IQ4_XS> : BlockFormat<QuantType::IQ4_XS, BlockIq4xs, 256, /*kAlign=*/8, Codebook::kNone>,
                                         Int8Form<I8Order::kNibbleInterleaved, 32> {
  using Group = MagnitudeGroup;
  static constexpr const char* kName = "iq4_xs";

  // The 6-bit scale ls of sub-block ib from the block's first 8 bytes: head = d | scales_h << 16,
  // then scales_l[0..3]; its scale is d * (ls - 32) (the block reads and the dp4a MMVQ's word
  // read, csrc/cuda/mmvq/lane_reads_iq4.h, share them).
  LOWBIT_HD static uint32_t sub_ls(uint32_t head, uint32_t scales_l, int ib) {
    return ((scales_l >> (4 * ib)) & 0xFu) | (((head >> (16 + 2 * ib)) & 3u) << 4);
  }
  LOWBIT_HD static float ls_scale(uint32_t head, uint32_t ls) {
    return fp16_to_float(static_cast<uint16_t>(head & 0xFFFFu)) * static_cast<float>(static_cast<int>(ls) - 32);
  }

  // d * (ls - 32) of 32-weight sub-block ib
  LOWBIT_HD static float sub_scale(BlockRef b, int ib) {
    static_assert(offsetof(Block, scales_h) == 2 && offsetof(Block, scales_l) == 4, "d, scales_h, scales_l: 8 bytes");
    // one 64-bit load (generic: blocks may sit in shared memory)
    const uint64_t first = load_u64<8>(b.bytes);
    const auto head = static_cast<uint32_t>(first);
    return ls_scale(head, sub_ls(head, static_cast<uint32_t>(first >> 32), ib));
  }

  LOWBIT_HD static Group decode_group(BlockRef b, int g, const Codebooks&) {
    return detail::iq4nl_group<8>(b.bytes + offsetof(Block, qs) + 16 * (g >> 2), g & 3, sub_scale(b, g >> 2));
  }

  // the eight nibbles of int8 group g (sub-block g / 4)
  LOWBIT_HD static uint32_t code_word(BlockRef b, int g) {
    return load_u32<4>(b.bytes + offsetof(Block, qs) + 16 * (g >> 2) + 4 * (g & 3));
  }

  LOWBIT_HD static Int8Group decode_i8(BlockRef b, int g, const Codebooks& cb) {
    return detail::iq4nl_i8(code_word(b, g), cb);
  }

  LOWBIT_HD static float scale_i8(BlockRef b, int s) { return sub_scale(b, s); }
};

}  // namespace lowbit
