// MMQ's block tiling and shared-memory plan: plain constexpr C++ that the kernel (mmq_kernel.cuh)
// compiles against and the planner (src/mmq_policy.cpp) reads, so that the split of K counts the
// blocks a multiprocessor really holds.
#pragma once

#include <type_traits>

#include "cuda/common/codebook_sizes.h"
#include "cuda/mmvq/mmvq_tiling.h"
#include "lowbit/formats/all.h"

namespace lowbit::cuda_detail {

inline constexpr int kMmqUnitElems = 256;

template <class Traits, int kTokens>
struct MmqTiling {
  using Rows = MmvqTiling<Traits>;  // a warp's 16 rows: the bf16 MMVQ's staging of one unit
  static_assert(Rows::kUnitElems == kMmqUnitElems, "one K unit for both kernels");
  static_assert(kTokens % 16 == 0 && kTokens >= 16 && kTokens <= 128, "wgmma N of 16 .. 128");
  static constexpr int kWarps = 8;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRows = 16 * kWarps;
  static constexpr int kSliceBytes = kTokens * 128;  // T tokens x 64 weights of K, bf16
  static constexpr int kActBytes = 4 * kSliceBytes;  // T tokens x one unit
  static constexpr int kWeightBytes = kWarps * Rows::kStageBytes;
  static constexpr int kStageBytes = (kActBytes + kWeightBytes + 1023) / 1024 * 1024;
  static constexpr int kCodebookBytes = (codebook_bytes(Traits::kCodebook) + 1023) / 1024 * 1024;
  // Two blocks per multiprocessor where three stages of a 16-token tile fit half of shared memory
  // (more warps to hide each one's decode -> wgmma chain), else one block with up to four stages.
  static constexpr int kHalfBudget = 113 * 1024 - 1024;
  static constexpr bool kTwoBlocks = kTokens <= 16 && kCodebookBytes + 3 * kStageBytes <= kHalfBudget;
  static constexpr int kBlocksPerSm = kTwoBlocks ? 2 : 1;
  static constexpr int kBudget = (kTwoBlocks ? 113 : 227) * 1024 - 1024;  // less the alignment slack
  static constexpr int kFit = (kBudget - kCodebookBytes) / kStageBytes;
  static constexpr int kStages = kFit > 4 ? 4 : kFit;
  static_assert(kStages >= 2, "two stages fit shared memory");
  static constexpr int kSmemBytes = 1024 + kCodebookBytes + kStages * kStageBytes;
};

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

// Blocks of the kernel for `tokens`-token tiles of type t that one multiprocessor holds (0 for a
// tile the kernel has no instance of).
inline int mmq_blocks_per_sm(QuantType t, int tokens) {
  int blocks = 0;
  visit_weight_type(t, [&](auto traits) {
    visit_token_tile(tokens, [&](auto tile) { blocks = MmqTiling<decltype(traits), tile()>::kBlocksPerSm; });
  });
  return blocks;
}

}  // namespace lowbit::cuda_detail
