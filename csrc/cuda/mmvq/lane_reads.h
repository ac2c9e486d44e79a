// Every format's reads for the dp4a MMVQ (LaneReads<T>, lane_reads_<family>.h), what each format
// has of them, and the choices the kernel makes from that: a format without a specialization is
// read through its FormatTraits alone (decode_i8, scale_i8), so a new weight type runs on the dp4a
// MMVQ with no entry here, and gains one only where a read of its own measures faster.
//
// Host-compilable (LOWBIT_HD): tests/cpp/test_lane_reads.cpp checks each read against the format's
// own decode_i8, grid_i8 and scale_i8 on random blocks.
#pragma once

#include <type_traits>

#include "cuda/mmvq/lane_read_primitives.h"
#include "cuda/mmvq/lane_reads_iq1.h"
#include "cuda/mmvq/lane_reads_iq2.h"
#include "cuda/mmvq/lane_reads_iq3.h"
#include "cuda/mmvq/lane_reads_iq4.h"
#include "lowbit/formats/all.h"

namespace lowbit {

// The lane reads of the format whose FormatTraits is Traits.
template <class Traits>
using LaneReadsOf = LaneReads<Traits::kType>;

// decode_i8 for a caller that decodes all four int8 groups of a 32-weight sub-block in a row (the
// dp4a MMVQ): a format's reads may define decode_i8_whole_sub (or, a grid format,
// grid_i8_whole_sub), which loads the sub-block's whole bytes for every group (the same loads four
// times, which the compiler merges into one), where decode_i8 loads only what one group needs
// (kernels that decode one group per lane).
template <class Traits, class = void>
struct HasWholeSubDecode : std::false_type {};
template <class Traits>
struct HasWholeSubDecode<Traits, std::void_t<decltype(&LaneReadsOf<Traits>::decode_i8_whole_sub)>> : std::true_type {};

// Formats whose int8 groups also come as addends (decode_i8_addends, Int8Addends).
template <class Traits, class = void>
struct HasI8Addends : std::false_type {};
template <class Traits>
struct HasI8Addends<Traits, std::void_t<decltype(&LaneReadsOf<Traits>::decode_i8_addends)>> : std::true_type {};

// Formats that the dp4a MMVQ reads as aligned words. For blocks 2 mod 4 bytes long, where a row's
// blocks pair into 4-byte-aligned spans (an even number of blocks per row, rows 4-byte aligned),
// so that a thread whose blocks are all first or all second of their pair knows each block's
// address mod 4: lane_words(block4, sub, odd) reads sub-block `sub` of the block at
// block4 + 2 * odd (phase_words) into LaneWords (IQ1_M and IQ4_XS, whose blocks are 8-byte
// aligned, are always read with odd == false and block4 the block); grid_i8_from (grid formats)
// or decode_i8_from, scale_i8_from and, with addends, decode_i8_addends_from decode from those.
// Halfword and byte loads of the same bytes cost an L1 request each (IQ4_NL: 9 -> 5 load
// instructions per block in SASS; timings in NOTES.md).
template <class Traits, class = void>
struct HasLaneWords : std::false_type {};
template <class Traits>
struct HasLaneWords<Traits, std::void_t<decltype(LaneReadsOf<Traits>::lane_words(nullptr, 0, false))>>
    : std::true_type {};

// Formats whose lane words give each group's signs as a seven-bit code (sign_code_from), the
// eighth sign its parity: the lane kernel can take the group's byte masks from a table.
template <class Traits, class = void>
struct HasSignCodes : std::false_type {};
template <class Traits>
struct HasSignCodes<Traits, std::void_t<decltype(&LaneReadsOf<Traits>::sign_code_from)>> : std::true_type {};

// Formats whose whole-sub-block read also comes as addends (decode_i8_addends_whole_sub).
template <class Traits, class = void>
struct HasWholeSubAddends : std::false_type {};
template <class Traits>
struct HasWholeSubAddends<Traits, std::void_t<decltype(&LaneReadsOf<Traits>::decode_i8_addends_whole_sub)>>
    : std::true_type {};

// Where the dp4a MMVQ's pointer into a block sits for a thread decoding sub-block s: a format
// whose sub-block s is read at one offset from the block (lane_anchor(s)) lets the thread keep
// that address and reach its bytes by immediate offsets, instead of forming block + offset anew
// for each load (ptxas rematerializes such per-thread offsets at 64 registers).
template <class Traits, class = void>
struct HasLaneAnchor : std::false_type {};
template <class Traits>
struct HasLaneAnchor<Traits, std::void_t<decltype(LaneReadsOf<Traits>::lane_anchor(0))>> : std::true_type {};

template <class Traits>
LOWBIT_HD constexpr int lane_anchor(int s) {
  if constexpr (HasLaneAnchor<Traits>::value)
    return LaneReadsOf<Traits>::lane_anchor(s);
  else
    return 0;
}

// A grid format's grid_i8 through the whole-sub-block read where its reads have one
// (grid_i8_whole_sub).
template <class Traits, class = void>
struct HasWholeSubGrid : std::false_type {};
template <class Traits>
struct HasWholeSubGrid<Traits, std::void_t<decltype(&LaneReadsOf<Traits>::grid_i8_whole_sub)>> : std::true_type {};

template <class Traits, bool kWholeSub = true>
LOWBIT_HD GridGroup grid_i8_in_sub_block(BlockRef b, int g, const Codebooks& cb) {
  if constexpr (kWholeSub && HasWholeSubGrid<Traits>::value)
    return LaneReadsOf<Traits>::grid_i8_whole_sub(b, g, cb);
  else
    return Traits::grid_i8(b, g, cb);
}

// Group l of the sub-block read by lane_words, as decode_i8 gives it.
template <class Traits>
LOWBIT_HD Int8Group decode_i8_from_words(const typename LaneReadsOf<Traits>::LaneWords& w, int l, const Codebooks& cb) {
  if constexpr (HasGridI8<Traits>::value)
    return apply_sign_bits(LaneReadsOf<Traits>::grid_i8_from(w, l, cb));
  else
    return LaneReadsOf<Traits>::decode_i8_from(w, l, cb);
}

template <class Traits, bool kWholeSub = true>
LOWBIT_HD Int8Group decode_i8_in_sub_block(BlockRef b, int g, const Codebooks& cb) {
  if constexpr (kWholeSub && HasWholeSubDecode<Traits>::value)
    return LaneReadsOf<Traits>::decode_i8_whole_sub(b, g, cb);
  else if constexpr (kWholeSub && HasWholeSubGrid<Traits>::value)
    return apply_sign_bits(LaneReadsOf<Traits>::grid_i8_whole_sub(b, g, cb));
  else
    return Traits::decode_i8(b, g, cb);
}

// A format's LaneWords where it has them (HasLaneWords), else an empty placeholder.
template <class Traits, class = void>
struct LaneWordsOf {
  struct type {};
};
template <class Traits>
struct LaneWordsOf<Traits, std::void_t<typename LaneReadsOf<Traits>::LaneWords>> {
  using type = typename LaneReadsOf<Traits>::LaneWords;
};

}  // namespace lowbit
