// The traits template every format specializes, and the list of weight types kernels iterate.
//
// A FormatTraits<T> specialization derives from BlockFormat, which states the facts taken from the
// block struct whose layout IS the format (Block, its size static_assert'ed where it is defined;
// kBlockElems, kBlockBytes, kAlign: alignment of a block start when the tensor base is 16-byte
// aligned; kCodebook: the grid table it reads; kSplitScales), and adds kName, Group (the decoded
// form) and
//   static Group decode_group(BlockRef block, int g, const Codebooks& cb)
// decoding weights [8g, 8g + 8) of the block, and, for integer-coded formats, the int8 form below.
// That is all a format states: how one kernel reads a format faster (the dp4a MMVQ's aligned-word
// reads, anchors, addends) lives beside that kernel (csrc/cuda/mmvq/lane_reads*.h) and falls back to
// these traits for a type it does not name. Adding a format means one specialization and its
// decode primitive; the CPU reference and every kernel are templates over these traits.
#pragma once

#include <type_traits>

#include "lowbit/formats/common.h"
#include "lowbit/quant_type.h"

namespace lowbit {

template <QuantType T>
struct FormatTraits;  // specialized in the family headers

// The facts every specialization states, from its block struct: a specialization derives from
// BlockFormat and adds kName, Group and decode_group.
//
// Integer-coded formats also state the int8 form (deriving from Int8Form too):
//   kI8Order, kI8ScaleElems (16 or 32 weights share one scale),
//   static Int8Group decode_i8(BlockRef block, int g, const Codebooks& cb)
//   static float scale_i8(BlockRef block, int s)   // scale of weights [kI8ScaleElems * s, ...)
// with weight = scale_i8 * int8, equal (as floats) to what decode_group yields. A grid format
// defines grid_i8 (magnitudes and sign bits apart, GridGroup) and takes decode_i8 from
// SignedGridInt8. The helpers such a specialization keeps public (code_word, group_grid,
// sub_scale, ...) are parts of these reads that other reads of the same bytes reuse.
template <QuantType T, class BlockT, int kElems, int kAlignBytes, Codebook kBook, bool kSplit = false>
struct BlockFormat {
  using Block = BlockT;
  static constexpr QuantType kType = T;
  static constexpr int kBlockElems = kElems;
  static constexpr int kBlockBytes = static_cast<int>(sizeof(BlockT));
  static constexpr int kAlign = kAlignBytes;
  static constexpr Codebook kCodebook = kBook;
  static constexpr bool kSplitScales = kSplit;
};

template <I8Order kOrder, int kScaleElems>
struct Int8Form {
  static constexpr I8Order kI8Order = kOrder;
  static constexpr int kI8ScaleElems = kScaleElems;
};

inline constexpr int kGroupElems = 8;  // every decode primitive yields eight weights

// The int8 decode of a grid format (one that defines grid_i8: magnitudes and sign bits apart),
// the signs applied; Derived is the format's FormatTraits.
template <class Derived>
struct SignedGridInt8 {
  LOWBIT_HD static Int8Group decode_i8(BlockRef b, int g, const Codebooks& cb) {
    return apply_sign_bits(Derived::grid_i8(b, g, cb));
  }
};

// Whether a format has the int8 form (derives from Int8Form).
template <class Traits, class = void>
struct HasInt8 : std::false_type {};
template <class Traits>
struct HasInt8<Traits, std::void_t<decltype(Traits::kI8ScaleElems)>> : std::true_type {};

// Whether a format is a grid format of the int8 form (defines grid_i8, GridGroup).
template <class Traits, class = void>
struct HasGridI8 : std::false_type {};
template <class Traits>
struct HasGridI8<Traits, std::void_t<decltype(&Traits::grid_i8)>> : std::true_type {};

// Whether a grid format hands out its groups by reference (defines grid_codes, GridCodes).
template <class Traits, class = void>
struct HasGridCodes : std::false_type {};
template <class Traits>
struct HasGridCodes<Traits, std::void_t<decltype(&Traits::grid_codes)>> : std::true_type {};

}  // namespace lowbit

// X(Name) for every weight type, in ggml id order then lowbit's split types.
#define LOWBIT_FOR_EACH_WEIGHT_TYPE(X) \
  X(Q5_0)                              \
  X(Q8_0)                              \
  X(IQ2_XXS)                           \
  X(IQ2_XS)                            \
  X(IQ3_XXS)                           \
  X(IQ1_S)                             \
  X(IQ4_NL)                            \
  X(IQ3_S)                             \
  X(IQ2_S)                             \
  X(IQ4_XS)                            \
  X(IQ1_M)                             \
  X(MXFP4)                             \
  X(MXFP8_E4M3)                        \
  X(MXFP4_SPLIT)
