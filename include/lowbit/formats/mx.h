// The MX formats: GGUF MXFP4 (one block = E8M0 byte + 16 packed bytes) and lowbit's split layouts
// as checkpoints and Ascend store them (elements tensor + a separate [N, K/32] E8M0 tensor):
// MXFP8 with E4M3 elements, and MXFP4 with E2M1 elements packed two per byte, EVEN element in the
// LOW nibble (GGUF's MXFP4 instead puts weight j low and weight j + 16 high).
#pragma once

#include <cstddef>

#include "lowbit/formats/codebooks.h"
#include "lowbit/formats/traits.h"

namespace lowbit {

struct BlockMxfp4 {
  uint8_t e;       // E8M0 exponent
  uint8_t qs[16];  // E2M1 codes: low nibble weight j, high nibble weight j + 16
};
static_assert(sizeof(BlockMxfp4) == 17, "MXFP4 block is 17 bytes");

// One 32-element block of the split layouts, elements only (the scale is a separate tensor).
struct BlockMxfp8Elements {
  uint8_t e4m3[32];
};
static_assert(sizeof(BlockMxfp8Elements) == 32, "MXFP8 element block is 32 bytes");

struct BlockMxfp4Elements {
  uint8_t packed[16];  // element 2i in the low nibble of byte i, element 2i + 1 in the high nibble
};
static_assert(sizeof(BlockMxfp4Elements) == 16, "split MXFP4 element block is 16 bytes");

inline constexpr int kMxBlock = 32;  // elements sharing one E8M0 scale

namespace detail {
// Doubled E2M1 magnitudes {0, 1, 2, 3, 4, 6, 8, 12} (ggml's kvalues_mxfp4, first half).
inline constexpr uint32_t kE2m1Mag2Lo = codebook::table_word(codebook::kKvaluesMxfp4, 0);
inline constexpr uint32_t kE2m1Mag2Hi = codebook::table_word(codebook::kKvaluesMxfp4, 1);

// Four E2M1 codes (one per byte) -> doubled magnitudes and signs. GGUF MXFP4 gives code 0b1000 no
// sign (ggml reads it as the int8 -0 = 0, so +0.0); the split layout follows OCP MX, where 0b1000
// is -0.0, and keeps the sign (kSignedZero).
template <bool kSignedZero>
LOWBIT_HD void e2m1_word(uint32_t codes, uint32_t& mag, uint32_t& neg) {
  mag = byte_perm(kE2m1Mag2Lo, kE2m1Mag2Hi, nibble_selector(codes));
  neg = (codes << 4) & 0x80808080u;
  if constexpr (!kSignedZero) neg &= nonzero_bytes(codes & 0x07070707u);
}

// Doubled E2M1 values as signed bytes (ggml's kvalues_mxfp4; Codebooks::e2m1_i8).
LOWBIT_HD Int8Group e2m1_i8(uint32_t w, const Codebooks& cb) {
  return nibble_lookup_i8(w, cb.e2m1_i8[0], cb.e2m1_i8[1], cb.e2m1_i8[2], cb.e2m1_i8[3]);
}
}  // namespace detail

template <>
struct FormatTraits<QuantType::MXFP4> : BlockFormat<QuantType::MXFP4, BlockMxfp4, 32, /*kAlign=*/1, Codebook::kNone>,
                                        Int8Form<I8Order::kNibbleInterleaved, 32> {
  using Group = MagnitudeGroup;
  static constexpr const char* kName = "mxfp4";

  LOWBIT_HD static Group decode_group(BlockRef b, int g, const Codebooks&) {
    const uint8_t* p = b.bytes + offsetof(Block, qs) + 8 * (g & 1);
    const int shift = 4 * (g >> 1);
    MagnitudeGroup r;
    detail::e2m1_word<false>((load_u32<1>(p) >> shift) & 0x0F0F0F0Fu, r.mag[0], r.neg[0]);
    detail::e2m1_word<false>((load_u32<1>(p + 4) >> shift) & 0x0F0F0F0Fu, r.mag[1], r.neg[1]);
    r.scale = e8m0_to_float_half_ggml(b.bytes[offsetof(Block, e)]);
    return r;
  }

  LOWBIT_HD static Int8Group decode_i8(BlockRef b, int g, const Codebooks& cb) {
    return detail::e2m1_i8(load_u32<1>(b.bytes + offsetof(Block, qs) + 4 * g), cb);
  }

  LOWBIT_HD static float scale_i8(BlockRef b, int) { return e8m0_to_float_half_ggml(b.bytes[offsetof(Block, e)]); }
};

template <>
struct FormatTraits<QuantType::MXFP8_E4M3> : BlockFormat<QuantType::MXFP8_E4M3, BlockMxfp8Elements, kMxBlock,
                                                         /*kAlign=*/16, Codebook::kNone, /*kSplitScales=*/true> {
  using Group = Fp8Group;
  static constexpr const char* kName = "mxfp8_e4m3";

  LOWBIT_HD static Group decode_group(BlockRef b, int g, const Codebooks&) {
    Fp8Group r;
    r.e4m3[0] = load_u32<4>(b.bytes + 8 * g);
    r.e4m3[1] = load_u32<4>(b.bytes + 8 * g + 4);
    r.scale = e8m0_to_float(b.split_scale);
    return r;
  }
};

template <>
struct FormatTraits<QuantType::MXFP4_SPLIT> : BlockFormat<QuantType::MXFP4_SPLIT, BlockMxfp4Elements, kMxBlock,
                                                          /*kAlign=*/16, Codebook::kNone, /*kSplitScales=*/true>,
                                              Int8Form<I8Order::kContiguous, 32> {
  using Group = MagnitudeGroup;
  static constexpr const char* kName = "mxfp4_split";

  LOWBIT_HD static Group decode_group(BlockRef b, int g, const Codebooks&) {
    const uint32_t w = load_u32<4>(b.bytes + 4 * g);
    const uint32_t even = w & 0x0F0F0F0Fu, odd = (w >> 4) & 0x0F0F0F0Fu;
    MagnitudeGroup r;
    detail::e2m1_word<true>(byte_perm(even, odd, 0x5140u), r.mag[0], r.neg[0]);  // elements 0..3
    detail::e2m1_word<true>(byte_perm(even, odd, 0x7362u), r.mag[1], r.neg[1]);  // elements 4..7
    r.scale = e8m0_to_float(b.split_scale) * 0.5f;  // magnitudes are doubled; exact, also for NaN
    return r;
  }

  // a word's nibbles are elements 8g .. 8g + 7 in order (even element low)
  LOWBIT_HD static Int8Group decode_i8(BlockRef b, int g, const Codebooks& cb) {
    return detail::e2m1_i8(load_u32<4>(b.bytes + 4 * g), cb);
  }

  LOWBIT_HD static float scale_i8(BlockRef b, int) { return e8m0_to_float(b.split_scale) * 0.5f; }
};

}  // namespace lowbit
