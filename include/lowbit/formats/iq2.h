// IQ2_XXS, IQ2_XS, IQ2_S: 2-bit-class I-quants. Each group of eight weights is one row of an
// E8 lattice codebook (magnitudes 8, 25, 43) with eight sign bits and a 4-bit sub-block scale.
#pragma once

#include <cstddef>

#include "lowbit/formats/codebooks.h"
#include "lowbit/formats/traits.h"

namespace lowbit {

struct BlockIq2xxs {
  uint16_t d;       // fp16 super-block scale
  uint16_t qs[32];  // per 32 weights: 4 grid index bytes, then 4 x 7-bit sign codes + 4-bit scale
};
static_assert(sizeof(BlockIq2xxs) == 66, "IQ2_XXS block is 66 bytes");

struct BlockIq2xs {
  uint16_t d;
  uint16_t qs[32];    // per 8 weights: 9-bit grid index | 7-bit sign code << 9
  uint8_t scales[8];  // 4-bit scale per 16 weights
};
static_assert(sizeof(BlockIq2xs) == 74, "IQ2_XS block is 74 bytes");

struct BlockIq2s {
  uint16_t d;
  uint8_t qs[64];     // [0, 32): low 8 bits of the grid index per 8 weights; [32, 64): sign bytes
  uint8_t qh[8];      // 2 high index bits per 8 weights
  uint8_t scales[8];  // 4-bit scale per 16 weights
};
static_assert(sizeof(BlockIq2s) == 82, "IQ2_S block is 82 bytes");

namespace detail {
// scale = d * (0.5 + s) * 0.25 in ggml's operation order
LOWBIT_HD float iq2_scale(float d, uint32_t s4) {
  return d * (0.5f + static_cast<float>(s4)) * 0.25f;
}

LOWBIT_HD MagnitudeGroup grid_group(uint64_t grid_row, uint32_t sign_bits, float scale) {
  MagnitudeGroup r;
  r.mag[0] = static_cast<uint32_t>(grid_row);
  r.mag[1] = static_cast<uint32_t>(grid_row >> 32);
  r.neg[0] = spread_sign_bits4(sign_bits);
  r.neg[1] = spread_sign_bits4(sign_bits >> 4);
  r.scale = scale;
  return r;
}
}  // namespace detail

template <>
struct FormatTraits<QuantType::IQ2_XXS>
    : BlockFormat<QuantType::IQ2_XXS, BlockIq2xxs, 256, /*kAlign=*/2, Codebook::kIq2xxs>,
      Int8Form<I8Order::kContiguous, 32>,
      SignedGridInt8<FormatTraits<QuantType::IQ2_XXS>> {
  using Group = MagnitudeGroup;
  static constexpr const char* kName = "iq2_xxs";

  LOWBIT_HD static Group decode_group(BlockRef b, int g, const Codebooks& cb) {
    const GridCodes c = grid_codes(b, g);
    return detail::grid_group(cb.iq2xxs_grid[c.index[0]], c.signs, c.scale);
  }

  LOWBIT_HD static GridGroup grid_i8(BlockRef b, int g, const Codebooks& cb) {
    const uint8_t* sub = b.bytes + offsetof(Block, qs) + 8 * (g >> 2);
    const int l = g & 3;
    return group_grid(sub[l], load_u32<2>(sub + 4), l, cb);
  }

  // Group g by reference: its grid entry, sign bits and scale (decode_group, MMQ's bf16 tables).
  LOWBIT_HD static GridCodes grid_codes(BlockRef b, int g) {
    const uint8_t* sub = b.bytes + offsetof(Block, qs) + 8 * (g >> 2);
    const int l = g & 3;
    const uint32_t aux = load_u32<2>(sub + 4);
    const float d = fp16_to_float(static_cast<uint16_t>(load_u16<2>(b.bytes)));
    return GridCodes{{sub[l], 0u}, ksigns_iq2xs((aux >> (7 * l)) & 127u), detail::iq2_scale(d, aux >> 28)};
  }

  // Group l of a sub-block from its grid index and its sign/scale word (grid_i8 and the dp4a MMVQ's
  // reads, csrc/cuda/mmvq/lane_reads_iq2.h).
  LOWBIT_HD static GridGroup group_grid(uint32_t index, uint32_t aux, int l, const Codebooks& cb) {
    const uint64_t mag = cb.iq2xxs_grid[index];
    return GridGroup{{static_cast<uint32_t>(mag), static_cast<uint32_t>(mag >> 32)},
                     ksigns_iq2xs((aux >> (7 * l)) & 127u)};
  }

  LOWBIT_HD static float scale_i8(BlockRef b, int s) {
    const uint32_t aux = load_u32<2>(b.bytes + offsetof(Block, qs) + 8 * s + 4);
    return detail::iq2_scale(fp16_to_float(static_cast<uint16_t>(load_u16<2>(b.bytes))), aux >> 28);
  }
};

template <>
struct FormatTraits<QuantType::IQ2_XS>
    : BlockFormat<QuantType::IQ2_XS, BlockIq2xs, 256, /*kAlign=*/2, Codebook::kIq2xs>,
      Int8Form<I8Order::kContiguous, 16>,
      SignedGridInt8<FormatTraits<QuantType::IQ2_XS>> {
  using Group = MagnitudeGroup;
  static constexpr const char* kName = "iq2_xs";

  LOWBIT_HD static Group decode_group(BlockRef b, int g, const Codebooks& cb) {
    const uint32_t q = load_u16<2>(b.bytes + offsetof(Block, qs) + 2 * g);
    const uint32_t sc = b.bytes[offsetof(Block, scales) + (g >> 2)];
    const float d = fp16_to_float(static_cast<uint16_t>(load_u16<2>(b.bytes)));
    return detail::grid_group(cb.iq2xs_grid[q & 511u], ksigns_iq2xs(q >> 9),
                              detail::iq2_scale(d, (sc >> (4 * ((g & 3) >> 1))) & 0xFu));
  }

  LOWBIT_HD static GridGroup grid_i8(BlockRef b, int g, const Codebooks& cb) {
    const uint32_t q = load_u16<2>(b.bytes + offsetof(Block, qs) + 2 * g);
    const uint64_t mag = cb.iq2xs_grid[q & 511u];
    return GridGroup{{static_cast<uint32_t>(mag), static_cast<uint32_t>(mag >> 32)}, ksigns_iq2xs(q >> 9)};
  }

  LOWBIT_HD static float scale_i8(BlockRef b, int s) {  // s: 16-weight scale group
    const uint32_t sc = b.bytes[offsetof(Block, scales) + (s >> 1)];
    return detail::iq2_scale(fp16_to_float(static_cast<uint16_t>(load_u16<2>(b.bytes))), (sc >> (4 * (s & 1))) & 0xFu);
  }
};

template <>
struct FormatTraits<QuantType::IQ2_S> : BlockFormat<QuantType::IQ2_S, BlockIq2s, 256, /*kAlign=*/2, Codebook::kIq2s>,
                                        Int8Form<I8Order::kContiguous, 16>,
                                        SignedGridInt8<FormatTraits<QuantType::IQ2_S>> {
  using Group = MagnitudeGroup;
  static constexpr const char* kName = "iq2_s";

  LOWBIT_HD static Group decode_group(BlockRef b, int g, const Codebooks& cb) {
    const int ib = g >> 2, l = g & 3;
    const uint32_t qh = b.bytes[offsetof(Block, qh) + ib];
    const uint32_t index = b.bytes[offsetof(Block, qs) + g] | ((qh << (8 - 2 * l)) & 0x300u);
    const uint32_t signs = b.bytes[offsetof(Block, qs) + 32 + g];
    const uint32_t sc = b.bytes[offsetof(Block, scales) + ib];
    const float d = fp16_to_float(static_cast<uint16_t>(load_u16<2>(b.bytes)));
    return detail::grid_group(cb.iq2s_grid[index], signs, detail::iq2_scale(d, (sc >> (4 * (l >> 1))) & 0xFu));
  }

  LOWBIT_HD static GridGroup grid_i8(BlockRef b, int g, const Codebooks& cb) {
    return group_grid(b.bytes[offsetof(Block, qs) + g], b.bytes[offsetof(Block, qh) + (g >> 2)],
                      b.bytes[offsetof(Block, qs) + 32 + g], g & 3, cb);
  }

  LOWBIT_HD static float scale_i8(BlockRef b, int s) {  // s: 16-weight scale group
    const uint32_t sc = b.bytes[offsetof(Block, scales) + (s >> 1)];
    return detail::iq2_scale(fp16_to_float(static_cast<uint16_t>(load_u16<2>(b.bytes))), (sc >> (4 * (s & 1))) & 0xFu);
  }

  // Group l of a sub-block from its low index byte, the sub-block's qh byte and its sign byte
  // (grid_i8 and the dp4a MMVQ's word read, csrc/cuda/mmvq/lane_reads_iq2.h).
  LOWBIT_HD static GridGroup group_grid(uint32_t low, uint32_t qh, uint32_t signs, int l, const Codebooks& cb) {
    const uint64_t mag = cb.iq2s_grid[low | ((qh << (8 - 2 * l)) & 0x300u)];
    return GridGroup{{static_cast<uint32_t>(mag), static_cast<uint32_t>(mag >> 32)}, signs};
  }
};

}  // namespace lowbit
