// How the dp4a MMVQ reads IQ2_XXS and IQ2_S (LaneReads, lane_read_primitives.h): IQ2_XXS's
// sub-block of 8 bytes read whole from one anchor, and both formats' blocks as aligned words.
// IQ2_XS has none: its halfword codes read as aligned words measured slower (benchmarks/NOTES.md,
// 2026-11-29).
#pragma once

#include <cstddef>

#include "cuda/mmvq/lane_read_primitives.h"
#include "lowbit/formats/iq2.h"

namespace lowbit {

template <>
struct LaneReads<QuantType::IQ2_XXS> : LaneReadsBase<QuantType::IQ2_XXS> {
  // sub-block s's 8 bytes (grid indices, then signs and scale)
  LOWBIT_HD static constexpr int lane_anchor(int s) { return static_cast<int>(offsetof(Block, qs)) + 8 * s; }

  // grid_i8 from the sub-block's 8 bytes read whole (decode_i8_in_sub_block): the grid index is
  // byte l, the signs in the upper word. In the dp4a MMVQ this saves 3 of 12 loads per sub-block;
  // in the tensor-core MMVQ (one group per lane) the wider reads cost 12% at M = 4 (NOTES.md).
  LOWBIT_HD static GridGroup grid_i8_whole_sub(BlockRef b, int g, const Codebooks& cb) {
    const uint64_t sub = load_u64<2>(b.bytes + offsetof(Block, qs) + 8 * (g >> 2));
    const int l = g & 3;
    return Format::group_grid(static_cast<uint32_t>(sub >> (8 * l)) & 0xFFu, static_cast<uint32_t>(sub >> 32), l, cb);
  }

  // The aligned-word read of sub-block ib (HasLaneWords): its 8 bytes and d in four word loads
  // (five halfword loads in the SASS of the block reads). Plain loads, so kStaged (a copy in
  // shared memory: the lane kernel's staged rounds) reads the same way.
  struct LaneWords {
    uint32_t sub[2];  // the grid indices, then the sign/scale word
    uint32_t d;
  };
  template <bool kStaged = false>
  LOWBIT_HD static LaneWords lane_words(const uint8_t* block4, int ib, bool odd) {
    static_assert(offsetof(Block, qs) % 4 == 2, "phase_words runs start 2 mod 4");
    LaneWords r;
    phase_words(block4, static_cast<int>(offsetof(Block, qs)) + 8 * ib, odd, r.sub);
    r.d = phase_head_u16(block4, odd);
    return r;
  }
  LOWBIT_HD static GridGroup grid_i8_from(const LaneWords& w, int l, const Codebooks& cb) {
    return Format::group_grid(word_byte(w.sub[0], l), w.sub[1], l, cb);
  }
  // group l's seven-bit sign code (HasSignCodes; grid_i8_from's signs are its ksigns_iq2xs)
  LOWBIT_HD static uint32_t sign_code_from(const LaneWords& w, int l) { return (w.sub[1] >> (7 * l)) & 127u; }
  LOWBIT_HD static float scale_i8_from(const LaneWords& w, int) {
    return detail::iq2_scale(fp16_to_float(static_cast<uint16_t>(w.d)), w.sub[1] >> 28);
  }
};

template <>
struct LaneReads<QuantType::IQ2_S> : LaneReadsBase<QuantType::IQ2_S> {
  // The aligned-word read of sub-block ib (HasLaneWords): its 4 index and 4 sign bytes in four
  // word loads, qh, the scale byte and d in three more (thirteen in the SASS of the block reads).
  struct LaneWords {
    uint32_t low[1], signs[1];
    uint32_t qh, sc, d;
  };
  LOWBIT_HD static LaneWords lane_words(const uint8_t* block4, int ib, bool odd) {
    static_assert(offsetof(Block, qs) % 4 == 2 && (offsetof(Block, qs) + 32) % 4 == 2,
                  "phase_words runs start 2 mod 4");
    LaneWords r;
    phase_words(block4, static_cast<int>(offsetof(Block, qs)) + 4 * ib, odd, r.low);
    phase_words(block4, static_cast<int>(offsetof(Block, qs)) + 32 + 4 * ib, odd, r.signs);
    const uint8_t* block = block4 + 2 * odd;
    r.qh = block[offsetof(Block, qh) + ib];
    r.sc = block[offsetof(Block, scales) + ib];
    r.d = phase_head_u16(block4, odd);
    return r;
  }
  LOWBIT_HD static GridGroup grid_i8_from(const LaneWords& w, int l, const Codebooks& cb) {
    return Format::group_grid((w.low[0] >> (8 * l)) & 0xFFu, w.qh, (w.signs[0] >> (8 * l)) & 0xFFu, l, cb);
  }
  LOWBIT_HD static float scale_i8_from(const LaneWords& w, int h) {
    return detail::iq2_scale(fp16_to_float(static_cast<uint16_t>(w.d)), (w.sc >> (4 * h)) & 0xFu);
  }
};

}  // namespace lowbit
