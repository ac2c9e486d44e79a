// IQ3_XXS and IQ3_S: 3-bit-class I-quants. A group of eight weights is two rows of a
// four-element codebook, eight sign bits and a 4-bit sub-block scale.
#pragma once

#include <cstddef>

#include "lowbit/formats/codebooks.h"
#include "lowbit/formats/iq2.h"
#include "lowbit/formats/traits.h"

namespace lowbit {

struct BlockIq3xxs {
  uint16_t d;
  uint8_t qs[96];  // [0, 64): grid indices; [64, 96): per 32 weights 4 x 7-bit sign codes + 4-bit scale
};
static_assert(sizeof(BlockIq3xxs) == 98, "IQ3_XXS block is 98 bytes");

struct BlockIq3s {
  uint16_t d;
  uint8_t qs[64];     // low 8 bits of the grid indices
  uint8_t qh[8];      // ninth index bit, one byte per 32 weights
  uint8_t signs[32];  // one sign byte per 8 weights
  uint8_t scales[4];  // 4-bit scale per 32 weights
};
static_assert(sizeof(BlockIq3s) == 110, "IQ3_S block is 110 bytes");

namespace detail {
LOWBIT_HD MagnitudeGroup grid_pair_group(uint32_t row0, uint32_t row1, uint32_t sign_bits, float scale) {
  return grid_group(static_cast<uint64_t>(row0) | (static_cast<uint64_t>(row1) << 32), sign_bits, scale);
}
}  // namespace detail

template <>
struct FormatTraits<QuantType::IQ3_XXS>
    : BlockFormat<QuantType::IQ3_XXS, BlockIq3xxs, 256, /*kAlign=*/2, Codebook::kIq3xxs>,
      Int8Form<I8Order::kContiguous, 32>,
      SignedGridInt8<FormatTraits<QuantType::IQ3_XXS>> {
  using Group = MagnitudeGroup;
  static constexpr const char* kName = "iq3_xxs";

  LOWBIT_HD static Group decode_group(BlockRef b, int g, const Codebooks& cb) {
    const GridCodes c = grid_codes(b, g);
    return detail::grid_pair_group(cb.iq3xxs_grid[c.index[0]], cb.iq3xxs_grid[c.index[1]], c.signs, c.scale);
  }

  LOWBIT_HD static GridGroup grid_i8(BlockRef b, int g, const Codebooks& cb) {
    const int ib = g >> 2, l = g & 3;
    const uint8_t* qs = b.bytes + offsetof(Block, qs);
    return group_grid(qs[8 * ib + 2 * l], qs[8 * ib + 2 * l + 1], load_u32<2>(qs + 64 + 4 * ib), l, cb);
  }

  LOWBIT_HD static float scale_i8(BlockRef b, int s) {
    return sub_scale(load_u16<2>(b.bytes), load_u32<2>(b.bytes + offsetof(Block, qs) + 64 + 4 * s));
  }

  // Group g by reference: its two grid entries, sign bits and scale (decode_group, MMQ's bf16 tables).
  LOWBIT_HD static GridCodes grid_codes(BlockRef b, int g) {
    const int ib = g >> 2, l = g & 3;
    const uint8_t* qs = b.bytes + offsetof(Block, qs);
    const uint32_t aux = load_u32<2>(qs + 64 + 4 * ib);
    return GridCodes{{qs[8 * ib + 2 * l], qs[8 * ib + 2 * l + 1]},
                     ksigns_iq2xs((aux >> (7 * l)) & 127u),
                     sub_scale(load_u16<2>(b.bytes), aux)};
  }

  // Group l of a sub-block from its two grid indices and its sign/scale word, and the sub-block's
  // scale from d's bits and that word (the block reads and the dp4a MMVQ's word read,
  // csrc/cuda/mmvq/lane_reads_iq3.h, share them).
  LOWBIT_HD static GridGroup group_grid(uint32_t index0, uint32_t index1, uint32_t aux, int l, const Codebooks& cb) {
    return GridGroup{{cb.iq3xxs_grid[index0], cb.iq3xxs_grid[index1]}, ksigns_iq2xs((aux >> (7 * l)) & 127u)};
  }
  LOWBIT_HD static float sub_scale(uint32_t d_bits, uint32_t aux) {
    return fp16_to_float(static_cast<uint16_t>(d_bits)) * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
  }
};

template <>
struct FormatTraits<QuantType::IQ3_S> : BlockFormat<QuantType::IQ3_S, BlockIq3s, 256, /*kAlign=*/2, Codebook::kIq3s>,
                                        Int8Form<I8Order::kContiguous, 32>,
                                        SignedGridInt8<FormatTraits<QuantType::IQ3_S>> {
  using Group = MagnitudeGroup;
  static constexpr const char* kName = "iq3_s";

  // The two grid rows (four magnitudes each) and the eight sign bits of group g.
  LOWBIT_HD static void group_codes(BlockRef b, int g, const Codebooks& cb, uint32_t& row0, uint32_t& row1,
                                    uint32_t& signs) {
    const int ib = g >> 2, l = g & 3;
    const uint8_t* qs = b.bytes + offsetof(Block, qs) + 8 * ib;
    const uint32_t qh = b.bytes[offsetof(Block, qh) + ib];
    // the rows as the dp4a MMVQ's word read forms them (grid_rows, csrc/cuda/mmvq/lane_reads_iq3.h),
    // written out: through grid_rows ptxas gave the dequantize kernel 80 registers instead of 64
    // (NOTES.md, 17e1f35)
    row0 = cb.iq3s_grid[qs[2 * l] | ((qh << (8 - 2 * l)) & 256u)];
    row1 = cb.iq3s_grid[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256u)];
    signs = b.bytes[offsetof(Block, signs) + 4 * ib + l];
  }

  LOWBIT_HD static Group decode_group(BlockRef b, int g, const Codebooks& cb) {
    uint32_t row0, row1, signs;
    group_codes(b, g, cb, row0, row1, signs);
    return detail::grid_pair_group(row0, row1, signs, scale_i8(b, g >> 2));
  }

  LOWBIT_HD static GridGroup grid_i8(BlockRef b, int g, const Codebooks& cb) {
    GridGroup r;
    group_codes(b, g, cb, r.mag[0], r.mag[1], r.signs);
    return r;
  }

  // Group g by reference (MMQ's bf16 tables): group_codes' parse, kept apart from it because
  // decode_group and grid_i8 written on it moved the MMVQ kernels' SASS (benchmarks/NOTES.md);
  // the GridCodes GTest holds the two equal.
  LOWBIT_HD static GridCodes grid_codes(BlockRef b, int g) {
    const int ib = g >> 2, l = g & 3;
    const uint8_t* qs = b.bytes + offsetof(Block, qs) + 8 * ib;
    const uint32_t qh = b.bytes[offsetof(Block, qh) + ib];
    return GridCodes{{qs[2 * l] | ((qh << (8 - 2 * l)) & 256u), qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256u)},
                     b.bytes[offsetof(Block, signs) + 4 * ib + l],
                     scale_i8(b, ib)};
  }

  LOWBIT_HD static float scale_i8(BlockRef b, int s) {
    return sub_scale(load_u16<2>(b.bytes), (b.bytes[offsetof(Block, scales) + (s >> 1)] >> (4 * (s & 1))) & 0xFu);
  }
  LOWBIT_HD static float sub_scale(uint32_t d_bits, uint32_t s4) {
    return fp16_to_float(static_cast<uint16_t>(d_bits)) * static_cast<float>(1 + 2 * static_cast<int>(s4));
  }
};

}  // namespace lowbit
