// MMQ's block tiling and shared-memory plan: plain constexpr C++ that the kernel (mmq_kernel.cuh)
// compiles against and the planner (src/mmq_policy.cpp) reads, so that the split of K counts the
// blocks a multiprocessor really holds.
#pragma once

#include <cstdint>
#include <numeric>
#include <type_traits>

#include "cuda/common/codebook_sizes.h"
#include "cuda/mmq/mmq_grid_tables.h"
#include "cuda/mmq/mmq_k_order.h"
#include "cuda/mmvq/mmvq_tiling.h"
#include "lowbit/formats/all.h"

namespace lowbit::cuda_detail {

inline constexpr int kMmqUnitElems = 256;

// A warp's 16 staged rows (the staging of the bf16 MMVQ, mmvq/row_pipeline.cuh) with spans for a
// unit that starts a multiple of kStartAlign bytes past a 16-byte boundary (row_span_bytes).
template <class Traits, int kStartAlign>
struct MmqRowSpans {
  using Unit = MmvqTiling<Traits>;  // rows and unit as the MMVQ stages them; only the spans differ
  static constexpr int kRows = Unit::kRows;
  static constexpr int kUnitElems = Unit::kUnitElems;
  static constexpr int kBlocksPerUnit = Unit::kBlocksPerUnit;
  static constexpr int kUnitBytes = Unit::kUnitBytes;
  static constexpr int kAlign = kStartAlign;
  static constexpr int kSpanBytes = row_span_bytes(kUnitBytes, kAlign);
  static constexpr int kChunks = kSpanBytes / 16;
  static constexpr int kStageBytes = kRows * kSpanBytes;
};

// The spans every weight an entry point accepts fits (kUnitStartAlign, as the MMVQ's): IQ4_XS 144
// bytes, IQ2_XXS and IQ1_M 80, IQ3_XXS 112, MXFP4_SPLIT 144, MXFP8 272.
template <class Traits>
using MmqRows = MmqRowSpans<Traits, kUnitStartAlign<Traits>>;

// The spans of units aligned as the unit's own size allows (IQ4_NL: 144 bytes, a multiple of 16),
// for a weight whose address and strides are (mmq_exact_spans_fit). They are shorter than MmqRows'
// for IQ4_NL, Q8_0, Q5_0 and GGUF MXFP4, whose blocks are less aligned than their units; a kernel
// may have an instance for each and pick at launch.
template <class Traits>
using MmqExactRows = MmqRowSpans<Traits, std::gcd(16, MmvqTiling<Traits>::kUnitBytes)>;
template <class Traits>
inline constexpr bool kMmqExactRowsShorter = MmqExactRows<Traits>::kSpanBytes < MmqRows<Traits>::kSpanBytes;

// Whether MmqExactRows' spans hold every unit of a weight at `w` with these strides (bytes): each
// term of a unit's address a multiple of kAlign, so that it starts at most 16 - kAlign bytes past a
// 16-byte boundary.
template <class Traits>
bool mmq_exact_spans_fit(const void* w, int64_t row_stride, int64_t expert_stride) {
  constexpr int a = MmqExactRows<Traits>::kAlign;
  return reinterpret_cast<uintptr_t>(w) % a == 0 && row_stride % a == 0 && expert_stride % a == 0;
}

// kInt8: the activations as int8 codes per token and 32 weights with their float32 scales (the int8
// wgmma path, mmq_kernel.cuh), else bf16. kGrouped: the tiling of the grouped MoE kernel
// (mmq_grouped_kernel.cuh), which shares the mainloop but not the grid. kExactSpans: the weight rows
// staged by MmqExactRows (the launch checked mmq_exact_spans_fit), else by MmqRows.
template <class Traits, int kTokens, bool kInt8 = false, bool kGrouped = false, bool kExactSpans = false>
struct MmqTiling {
  using Rows = std::conditional_t<kExactSpans, MmqExactRows<Traits>, MmqRows<Traits>>;
  static_assert(Rows::kUnitElems == kMmqUnitElems, "one K unit for both kernels");
  static_assert(kTokens % 16 == 0 && kTokens >= 16 && kTokens <= 128, "wgmma N of 16 .. 128");
  // The grouped kernel's bf16 48-token tile of the nibble formats (routings of about 32 pairs per
  // expert): one block of sixteen warps per multiprocessor in place of two blocks of eight. Its four
  // warpgroups share each activation stage, and alone on its multiprocessor it has the shared memory
  // for a pair table per lane. The grid formats lost with it: their table gains nothing from the
  // shared memory, and the second block had filled their drains (benchmarks/NOTES.md, "a wide
  // grouped tile").
  static constexpr bool kWide = kGrouped && !kInt8 && kTokens == 48 && kMmqNibblePairs<Traits>;
  static constexpr int kWarps = kWide ? 16 : 8;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRows = 16 * kWarps;
  // A slice is T tokens x 128 bytes of K (64 bf16 or 128 int8 weights): one swizzle atom row each.
  static constexpr int kSliceBytes = kTokens * 128;
  static constexpr int kSlices = kInt8 ? 2 : 4;                 // per 256-weight unit
  static constexpr int kActBytes = kSlices * kSliceBytes;       // T tokens x one unit
  static constexpr int kScaleBytes = kInt8 ? kTokens * 32 : 0;  // int8: [T][8] float32 scales
  static constexpr int kWeightBytes = kWarps * Rows::kStageBytes;
  static constexpr int kStageBytes = (kActBytes + kScaleBytes + kWeightBytes + 1023) / 1024 * 1024;
  // the bf16 path of the nibble formats decodes by pairs from a table (mmq_k_order.h), that of the
  // grid formats with grid_codes from a bf16 copy of the grid (mmq_grid_tables.h)
  static constexpr bool kNibblePairs = !kInt8 && kMmqNibblePairs<Traits>;
  static constexpr bool kGridTables = !kInt8 && kMmqGridTables<Traits>;
  // the format's grid (int8, or its bf16 copy), or the pair table, ahead of the ring
  static constexpr int codebook_bytes_with(int pair_copies) {
    return ((kGridTables ? kGridBf16Bytes<Traits> : codebook_bytes(Traits::kCodebook)) +
            (kNibblePairs ? pair_copies * kNibblePairTableBytes : 0) + 1023) /
           1024 * 1024;
  }
  // Two blocks per multiprocessor (more warps to hide each one's decode -> wgmma chain) where a
  // ring of at least three stages for tiles of up to 32 tokens, two for the grouped kernel's bf16
  // 48- and 64-token tiles, fits half of shared memory (the latter's grid has a block per tile of
  // pairs of every expert to fill the drains of a two-stage ring); the dense grid at 64 tokens fills
  // the multiprocessors by splitting K and measured slower with two blocks (benchmarks/NOTES.md).
  // Else one block. Either way as many stages as fit, up to four.
  // The grouped kernel's row tables (mmq_grouped_kernel.cuh) follow the ring.
  static constexpr int kRowTableBytes = kGrouped ? 2 * kTokens * 4 : 0;
  // The dense bf16 kernel's activation tiles come by tensor copies (one box per slice, into the
  // same swizzle), which complete on an mbarrier per stage, after the ring.
  static constexpr bool kTensorActs = !kInt8 && !kGrouped;
  static constexpr int kBarrierBytes = kTensorActs ? 64 : 0;
  static constexpr int kHalfBudget = 113 * 1024 - 1024 - kRowTableBytes - kBarrierBytes;
  static constexpr int kTwoBlockStages = kTokens <= 32 ? 3 : 2;
  static constexpr bool kTwoBlocks = !kWide && (kTokens <= 32 || (kGrouped && !kInt8 && kTokens <= 64)) &&
                                     codebook_bytes_with(1) + kTwoBlockStages * kStageBytes <= kHalfBudget;
  static constexpr int kBlocksPerSm = kTwoBlocks ? 2 : 1;
  // The pair table once per lane (kNibblePairCopies copies, entry e of lane l at word 32 e + l): a
  // warp's 32 random lookups then meet no bank conflict (NOTES.md, the bound on the table's bank
  // conflicts). 32 KB: only a block alone on its multiprocessor has them.
  static constexpr int kPairCopies = kNibblePairs && !kTwoBlocks ? kNibblePairCopies : 1;
  static constexpr int kCodebookBytes = codebook_bytes_with(kPairCopies);
  static constexpr int kBudget =
      (kTwoBlocks ? 113 : 227) * 1024 - 1024 - kRowTableBytes - kBarrierBytes;  // less the alignment slack
  static constexpr int kFit = (kBudget - kCodebookBytes) / kStageBytes;
  // 128-token tiles keep two stages: IQ2_XXS's third (its 80-byte spans fit one) measured slower
  // (benchmarks/NOTES.md, "the two candidates of 1d4a804 run").
  static constexpr int kMaxStages = kTokens == 128 ? 2 : 4;
  static constexpr int kStages = kFit > kMaxStages ? kMaxStages : kFit;
  static_assert(kStages >= 2, "two stages fit shared memory");
  static_assert(!kInt8 || kStages >= 3, "the int8 path keeps units in flight");
  static_assert(kStages <= kBarrierBytes / 8 || !kTensorActs, "a barrier per stage");
  static constexpr int kSmemBytes = 1024 + kCodebookBytes + kStages * kStageBytes + kBarrierBytes;
};

// The int8 path's activations: per token and 256-weight unit, 256 int8 codes (each 32-weight run
// in the A fragment's K order: word t holds int8 group t's first four codes, word 4 + t its last
// four) and then the unit's eight float32 scales; tokens one after another ([M][k_pad / 256][288]).
inline constexpr int kMmqInt8UnitBytes = kMmqUnitElems + 32;

// Bytes of M tokens' activations in the kernel's form: int8 as above, or bf16 [M][k_pad]; the
// split-K partial sums follow them in the workspace.
constexpr int64_t mmq_activation_bytes(int64_t m, int64_t k_pad, bool int8) {
  return int8 ? m * (k_pad / kMmqUnitElems) * kMmqInt8UnitBytes : m * k_pad * 2;
}

// Whether the int8 path serves type Traits: an int8 form with one scale per 32 weights (the k32
// wgmma then covers exactly one scale group). Formats with 16-weight scales keep the bf16 path.
template <class Traits>
constexpr bool mmq_int8_form() {
  if constexpr (HasInt8<Traits>::value)
    return Traits::kI8ScaleElems == 32;
  else
    return false;
}

// The token tiles of the int8 path (16 .. 64: its int32 fragment and the float32 sums fit the
// registers there).
inline constexpr int kMmqInt8MaxTile = 64;

// The token tiles the kernels have instances of: f(std::integral_constant<int, T>{}) for the tile
// T == tokens; false (f not called) where there is none. The dense and grouped launchers and the
// planner's occupancy all dispatch through it.
template <class F>
bool visit_token_tile(int tokens, F&& f) {
  switch (tokens) {
    case 16:
      f(std::integral_constant<int, 16>{});
      return true;
    case 32:
      f(std::integral_constant<int, 32>{});
      return true;
    case 64:
      f(std::integral_constant<int, 64>{});
      return true;
    case 128:
      f(std::integral_constant<int, 128>{});
      return true;
    default:
      return false;
  }
}

// The grouped kernel's bf16 token tiles: MMQ's and 48, for routings of about 32 pairs per expert
// (moe_block_size's 1.5x the average), where a 64-token tile is half padding: its wgmma, its B
// reads from shared memory and its activation copies scale with the tile, its weight decode not.
template <class F>
bool visit_grouped_token_tile(int tokens, F&& f) {
  if (tokens == 48) {
    f(std::integral_constant<int, 48>{});
    return true;
  }
  return visit_token_tile(tokens, f);
}

// Whether the int8 path has a token tile of `tokens` (MMQ's tiles up to kMmqInt8MaxTile; not the
// grouped kernel's 48, a bf16 tile).
inline bool mmq_int8_token_tile(int tokens) {
  return tokens <= kMmqInt8MaxTile && visit_token_tile(tokens, [](auto) {});
}

// f(std::integral_constant<int, T>{}) for the tile of the int8 path (type Traits) with
// T == tokens; false (f not called) where the type has no int8 path or the tile none.
template <class Traits, class F>
bool visit_int8_token_tile(int tokens, F&& f) {
  if constexpr (mmq_int8_form<Traits>()) {
    return mmq_int8_token_tile(tokens) && visit_token_tile(tokens, [&](auto tile) {
             if constexpr (tile() <= kMmqInt8MaxTile) f(tile);
           });
  } else {
    return false;
  }
}

// Blocks of the kernel for `tokens`-token tiles of type t that one multiprocessor holds (0 for a
// tile the kernel has no instance of).
inline int mmq_blocks_per_sm(QuantType t, int tokens, bool int8 = false) {
  int blocks = 0;
  visit_weight_type(t, [&](auto traits) {
    using Traits = decltype(traits);
    if (int8)
      visit_int8_token_tile<Traits>(tokens, [&](auto tile) { blocks = MmqTiling<Traits, tile(), true>::kBlocksPerSm; });
    else
      visit_token_tile(tokens, [&](auto tile) { blocks = MmqTiling<Traits, tile()>::kBlocksPerSm; });
  });
  return blocks;
}

}  // namespace lowbit::cuda_detail
