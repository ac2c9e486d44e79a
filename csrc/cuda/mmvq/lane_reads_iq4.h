// How the dp4a MMVQ reads IQ4_NL and IQ4_XS (LaneReads, lane_read_primitives.h): the codebook
// lookups as dp4a addends, IQ4_XS's sub-block codes as 64-bit loads from one anchor, and both
// formats' blocks as aligned words.
#pragma once

#include <cstddef>

#include "cuda/mmvq/lane_read_primitives.h"
#include "lowbit/formats/iq4.h"

namespace lowbit {

namespace detail {
static_assert(nibble_table_splits(codebook::kKvaluesIq4nl), "IQ4_NL: entries 0..7 negative, 8..15 in 0..126");
LOWBIT_HD Int8Addends iq4nl_i8_addends(uint32_t w, const Codebooks& cb) {
  return nibble_lookup_addends(w, cb.iq4nl_i8[0], cb.iq4nl_i8[1], cb.iq4nl_i8[2] + 0x01010101u,
                               cb.iq4nl_i8[3] + 0x01010101u);
}

// An IQ4_NL block as the dp4a MMVQ reads it in aligned words (HasLaneWords): five word loads
// instead of nine halfword ones.
struct Iq4nlWords {
  uint32_t qs[4];  // the 16 code bytes
  uint32_t d;      // the fp16 scale bits
};

// An IQ4_XS sub-block as the dp4a MMVQ reads it (HasLaneWords): its 16 code bytes as two 64-bit
// loads from one address per sub-block, the block's head as a third.
struct Iq4xsWords {
  uint32_t qs[4];  // the sub-block's 16 code bytes
  uint32_t head;   // d | scales_h << 16
  uint32_t ls;     // the sub-block's 6-bit scale
};
}  // namespace detail

template <>
struct LaneReads<QuantType::IQ4_NL> : LaneReadsBase<QuantType::IQ4_NL> {
  // decode_i8 as addends (nibble_lookup_addends): fewer instructions where a dot product is all
  // the caller does with the group (the dp4a MMVQ at one token)
  LOWBIT_HD static Int8Addends decode_i8_addends(BlockRef b, int g, const Codebooks& cb) {
    return detail::iq4nl_i8_addends(Format::code_word(b, g), cb);
  }

  // The aligned-word read (HasLaneWords) and the int8 forms and scale from it.
  using LaneWords = detail::Iq4nlWords;
  LOWBIT_HD static LaneWords lane_words(const uint8_t* block4, int, bool odd) {
    static_assert(offsetof(Block, qs) % 4 == 2, "phase_words runs start 2 mod 4");
    LaneWords r;
    phase_words(block4, offsetof(Block, qs), odd, r.qs);
    r.d = phase_head_u16(block4, odd);
    return r;
  }
  LOWBIT_HD static Int8Group decode_i8_from(const LaneWords& p, int g, const Codebooks& cb) {
    return detail::iq4nl_i8(p.qs[g], cb);
  }
  LOWBIT_HD static Int8Addends decode_i8_addends_from(const LaneWords& p, int g, const Codebooks& cb) {
    return detail::iq4nl_i8_addends(p.qs[g], cb);
  }
  LOWBIT_HD static float scale_i8_from(const LaneWords& p, int) { return fp16_to_float(static_cast<uint16_t>(p.d)); }
};

template <>
struct LaneReads<QuantType::IQ4_XS> : LaneReadsBase<QuantType::IQ4_XS> {
  // sub-block s's code bytes
  LOWBIT_HD static constexpr int lane_anchor(int s) { return static_cast<int>(offsetof(Block, qs)) + 16 * s; }

  LOWBIT_HD static Int8Addends decode_i8_addends(BlockRef b, int g, const Codebooks& cb) {
    return detail::iq4nl_i8_addends(Format::code_word(b, g), cb);
  }

  // The sub-block's 16 code bytes as two 64-bit loads (decode_i8: four 32-bit ones), for the dp4a
  // MMVQ at two tokens (at one the four loads measured faster, NOTES.md); weights in global memory
  // only (load_weight_words2 is a read-only-cache load)
  LOWBIT_HD static Int8Group decode_i8_whole_sub(BlockRef b, int g, const Codebooks& cb) {
    uint32_t w[2];
    load_weight_words2(b.bytes + lane_anchor(g >> 2) + 8 * ((g >> 1) & 1), w[0], w[1]);
    return detail::iq4nl_i8(w[g & 1], cb);
  }

  // decode_i8_whole_sub as addends (the dp4a MMVQ at one token, with whole-sub-block reads)
  LOWBIT_HD static Int8Addends decode_i8_addends_whole_sub(BlockRef b, int g, const Codebooks& cb) {
    uint32_t w[2];
    load_weight_words2(b.bytes + lane_anchor(g >> 2) + 8 * ((g >> 1) & 1), w[0], w[1]);
    return detail::iq4nl_i8_addends(w[g & 1], cb);
  }

  // The word read (HasLaneWords; 8-byte-aligned blocks: `odd` is always false). Through
  // lane_anchor's pointer ptxas formed some code addresses anew each round (the anchor subtracted
  // for the block, then added back, did not fold) and split the 64-bit code loads.
  // kStaged: the block is a copy in shared memory (the lane kernel's staged rounds).
  using LaneWords = detail::Iq4xsWords;
  template <bool kStaged = false>
  LOWBIT_HD static LaneWords lane_words(const uint8_t* block, int sub, bool) {
    LaneWords r;
    const uint8_t* qs = block + offsetof(Block, qs) + 16 * sub;
    load_weight_words2_from<kStaged>(qs, r.qs[0], r.qs[1]);
    load_weight_words2_from<kStaged>(qs + 8, r.qs[2], r.qs[3]);
    uint32_t scales_l;
    load_weight_words2_from<kStaged>(block, r.head, scales_l);
    r.ls = Format::sub_ls(r.head, scales_l, sub);
    return r;
  }
  LOWBIT_HD static Int8Group decode_i8_from(const LaneWords& p, int g, const Codebooks& cb) {
    return detail::iq4nl_i8(p.qs[g], cb);
  }
  LOWBIT_HD static Int8Addends decode_i8_addends_from(const LaneWords& p, int g, const Codebooks& cb) {
    return detail::iq4nl_i8_addends(p.qs[g], cb);
  }
  LOWBIT_HD static float scale_i8_from(const LaneWords& p, int) { return Format::ls_scale(p.head, p.ls); }
};

}  // namespace lowbit
