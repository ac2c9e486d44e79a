// How the dp4a MMVQ reads IQ3_XXS and IQ3_S (LaneReads, lane_read_primitives.h): a sub-block's
// index, sign and scale bytes as aligned words.
#pragma once

#include <cstddef>

#include "cuda/mmvq/lane_read_primitives.h"
#include "lowbit/formats/iq3.h"

namespace lowbit {

template <>
struct LaneReads<QuantType::IQ3_XXS> : LaneReadsBase<QuantType::IQ3_XXS> {
  // The aligned-word read of sub-block ib (HasLaneWords): its 8 index bytes, its sign/scale word
  // and d in six word loads (fourteen byte and halfword loads in the SASS of the block reads).
  struct LaneWords {
    uint32_t index[2];
    uint32_t aux[1];
    uint32_t d;
  };
  LOWBIT_HD static LaneWords lane_words(const uint8_t* block4, int ib, bool odd) {
    static_assert(offsetof(Block, qs) % 4 == 2 && (offsetof(Block, qs) + 64) % 4 == 2,
                  "phase_words runs start 2 mod 4");
    LaneWords r;
    phase_words(block4, static_cast<int>(offsetof(Block, qs)) + 8 * ib, odd, r.index);
    phase_words(block4, static_cast<int>(offsetof(Block, qs)) + 64 + 4 * ib, odd, r.aux);
    r.d = phase_head_u16(block4, odd);
    return r;
  }
  LOWBIT_HD static GridGroup grid_i8_from(const LaneWords& w, int l, const Codebooks& cb) {
    const uint32_t pair = w.index[l >> 1] >> (16 * (l & 1));
    return Format::group_grid(pair & 0xFFu, (pair >> 8) & 0xFFu, w.aux[0], l, cb);
  }
  LOWBIT_HD static float scale_i8_from(const LaneWords& w, int) { return Format::sub_scale(w.d, w.aux[0]); }
};

template <>
struct LaneReads<QuantType::IQ3_S> : LaneReadsBase<QuantType::IQ3_S> {
  // Group l's grid rows from its two low index bytes and the sub-block's high-bit byte qh.
  LOWBIT_HD static void grid_rows(uint32_t low0, uint32_t low1, uint32_t qh, int l, const Codebooks& cb, uint32_t& row0,
                                  uint32_t& row1) {
    row0 = cb.iq3s_grid[low0 | ((qh << (8 - 2 * l)) & 256u)];
    row1 = cb.iq3s_grid[low1 | ((qh << (7 - 2 * l)) & 256u)];
  }

  // The aligned-word read of sub-block ib (HasLaneWords): its 8 low index bytes and 4 sign bytes
  // in five word loads, qh, the scale byte and d in three more (eighteen byte and halfword loads
  // in the SASS of the block reads).
  struct LaneWords {
    uint32_t qs[2];
    uint32_t signs[1];
    uint32_t qh, s4, d;
  };
  LOWBIT_HD static LaneWords lane_words(const uint8_t* block4, int ib, bool odd) {
    static_assert(offsetof(Block, qs) % 4 == 2 && offsetof(Block, signs) % 4 == 2, "phase_words runs start 2 mod 4");
    LaneWords r;
    phase_words(block4, static_cast<int>(offsetof(Block, qs)) + 8 * ib, odd, r.qs);
    phase_words(block4, static_cast<int>(offsetof(Block, signs)) + 4 * ib, odd, r.signs);
    const uint8_t* block = block4 + 2 * odd;
    r.qh = block[offsetof(Block, qh) + ib];
    r.s4 = (block[offsetof(Block, scales) + (ib >> 1)] >> (4 * (ib & 1))) & 0xFu;
    r.d = phase_head_u16(block4, odd);
    return r;
  }
  LOWBIT_HD static GridGroup grid_i8_from(const LaneWords& w, int l, const Codebooks& cb) {
    const uint32_t pair = w.qs[l >> 1] >> (16 * (l & 1));
    GridGroup r;
    grid_rows(pair & 0xFFu, (pair >> 8) & 0xFFu, w.qh, l, cb, r.mag[0], r.mag[1]);
    r.signs = (w.signs[0] >> (8 * l)) & 0xFFu;
    return r;
  }
  LOWBIT_HD static float scale_i8_from(const LaneWords& w, int) { return Format::sub_scale(w.d, w.s4); }
};

}  // namespace lowbit
