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
    const uint32_t word = w.index[l >> 1];
    return Format::group_grid(word_byte(word, 2 * (l & 1)), word_byte(word, 2 * (l & 1) + 1), w.aux[0], l, cb);
  }
  // group l's seven-bit sign code (HasSignCodes; grid_i8_from's signs are its ksigns_iq2xs)
  LOWBIT_HD static uint32_t sign_code_from(const LaneWords& w, int l) { return (w.aux[0] >> (7 * l)) & 127u; }
  LOWBIT_HD static float scale_i8_from(const LaneWords& w, int) { return Format::sub_scale(w.d, w.aux[0]); }
};

template <>
struct LaneReads<QuantType::IQ3_S> : LaneReadsBase<QuantType::IQ3_S> {
  // A nine-bit grid index: byte j of `low` with byte j of `high` (0 or 1) as bit 8, one PRMT: its
  // upper bytes replicate the sign of high's byte j (zero), where the shift, mask and merge of the
  // high bit took three instructions per lookup. byte_perm, not __byte_perm: the intrinsic reads
  // three bits of each selector nibble, so it has no sign replication.
  LOWBIT_HD static uint32_t grid_index(uint32_t low, uint32_t high, int j) {
    const uint32_t hi = 4u + static_cast<uint32_t>(j), sign = 12u + static_cast<uint32_t>(j);
    return byte_perm(low, high, static_cast<uint32_t>(j) | hi << 4 | sign << 8 | sign << 12);
  }

  // The aligned-word read of sub-block ib (HasLaneWords): its 8 low index bytes and 4 sign bytes
  // in five word loads, qh, the scale byte and d in three more (eighteen byte and halfword loads
  // in the SASS of the block reads). high[h]: qh's bits 4h..4h + 3 spread to bytes (spread_bits4).
  struct LaneWords {
    uint32_t qs[2];
    uint32_t signs[1];
    uint32_t high[2], s4, d;
  };
  LOWBIT_HD static LaneWords lane_words(const uint8_t* block4, int ib, bool odd) {
    static_assert(offsetof(Block, qs) % 4 == 2 && offsetof(Block, signs) % 4 == 2, "phase_words runs start 2 mod 4");
    LaneWords r;
    phase_words(block4, static_cast<int>(offsetof(Block, qs)) + 8 * ib, odd, r.qs);
    phase_words(block4, static_cast<int>(offsetof(Block, signs)) + 4 * ib, odd, r.signs);
    const uint8_t* block = block4 + 2 * odd;
    const uint32_t qh = block[offsetof(Block, qh) + ib];
    r.high[0] = spread_bits4(qh);
    r.high[1] = spread_bits4(qh >> 4);
    r.s4 = (block[offsetof(Block, scales) + (ib >> 1)] >> (4 * (ib & 1))) & 0xFu;
    r.d = phase_head_u16(block4, odd);
    return r;
  }
  // Group l's grid rows: indices 2l and 2l + 1 of the sub-block, bytes 2 (l & 1) and 2 (l & 1) + 1 of
  // qs word l / 2, their high bits qh's bits 2l and 2l + 1.
  LOWBIT_HD static GridGroup grid_i8_from(const LaneWords& w, int l, const Codebooks& cb) {
    const uint32_t low = w.qs[l >> 1], high = w.high[l >> 1];
    const int j = 2 * (l & 1);
    GridGroup r;
    r.mag[0] = cb.iq3s_grid[grid_index(low, high, j)];
    r.mag[1] = cb.iq3s_grid[grid_index(low, high, j + 1)];
    r.signs = word_byte(w.signs[0], l);
    return r;
  }
  LOWBIT_HD static float scale_i8_from(const LaneWords& w, int) { return Format::sub_scale(w.d, w.s4); }
};

}  // namespace lowbit
