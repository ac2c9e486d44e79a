// How the dp4a MMVQ reads IQ1_S and IQ1_M (LaneReads, lane_read_primitives.h): a sub-block's
// index bytes, high bits and scales in a few whole-word loads.
#pragma once

#include <cstddef>

#include "cuda/mmvq/lane_read_primitives.h"
#include "lowbit/formats/iq1.h"

namespace lowbit {

template <>
struct LaneReads<QuantType::IQ1_S> : LaneReadsBase<QuantType::IQ1_S> {
  // The aligned-word read of sub-block ib (HasLaneWords): its 4 index bytes in two word loads, qh
  // and d in two more (eight in the SASS of the block reads).
  struct LaneWords {
    uint32_t low[1];
    uint32_t qh, d;
  };
  LOWBIT_HD static LaneWords lane_words(const uint8_t* block4, int ib, bool odd) {
    static_assert(offsetof(Block, qs) % 4 == 2, "phase_words runs start 2 mod 4");
    LaneWords r;
    phase_words(block4, static_cast<int>(offsetof(Block, qs)) + 4 * ib, odd, r.low);
    r.qh = load_u16<2>(block4 + 2 * odd + offsetof(Block, qh) + 2 * ib);
    r.d = phase_head_u16(block4, odd);
    return r;
  }
  LOWBIT_HD static Int8Group decode_i8_from(const LaneWords& w, int l, const Codebooks& cb) {
    return Format::group_i8((w.low[0] >> (8 * l)) & 0xFFu, w.qh, l, cb);
  }
  LOWBIT_HD static float scale_i8_from(const LaneWords& w, int) { return Format::sub_scale(w.d, w.qh); }
};

template <>
struct LaneReads<QuantType::IQ1_M> : LaneReadsBase<QuantType::IQ1_M> {
  // The word read of sub-block ib (HasLaneWords; the blocks are 8-byte aligned, `odd` is always
  // false): its 4 index bytes as one word, its 2 qh bytes as one halfword and the scale words as
  // one 64-bit load (seven loads in the SASS of the block reads).
  struct LaneWords {
    uint32_t low, qh;
    uint32_t s6;  // the sub-block's two 3-bit scales
    float super;
  };
  LOWBIT_HD static LaneWords lane_words(const uint8_t* block, int ib, bool) {
    const uint64_t words = load_u64<Format::kAlign>(block + offsetof(Block, scales));
    return LaneWords{
        load_weight_word(block + offsetof(Block, qs) + 4 * ib), load_weight_half(block + offsetof(Block, qh) + 2 * ib),
        static_cast<uint32_t>(words >> (16 * (ib >> 1) + 6 * (ib & 1))) & 0x3Fu, Format::super_scale(words)};
  }
  LOWBIT_HD static Int8Group decode_i8_from(const LaneWords& w, int l, const Codebooks& cb) {
    return Format::group_i8((w.low >> (8 * l)) & 0xFFu, (w.qh >> (4 * (l & 2))) & 0xFFu, l, cb);
  }
  LOWBIT_HD static float scale_i8_from(const LaneWords& w, int h) {
    return Format::sub_scale(w.super, (w.s6 >> (3 * h)) & 7u);
  }
};

}  // namespace lowbit
