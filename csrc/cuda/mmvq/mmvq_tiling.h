// The MMVQ kernels' tilings and shared-memory footprints, and the launch shapes that follow from
// them on a device: plain constexpr C++ that the kernels (mmvq/*.cuh) compile against and the
// planner (src/mmvq_policy.cpp) evaluates, so that a plan's launch shape is the kernels' own.
#pragma once

#include <cstdint>
#include <numeric>

#include "cuda/common/codebook_sizes.h"
#include "cuda/mmvq/lane_pairs_layout.h"
#include "cuda/tuning/tuning.h"
#include "lowbit/dispatch.h"
#include "lowbit/formats/all.h"

namespace lowbit::cuda_detail {

using tuning::LaneShape;

// The lane kernel's shape for a format (tuning/tuning.h): `words` selects the row of the kernel
// that reads the blocks as aligned words; the other may step differently, with the same rows and
// teams.
template <class Traits>
constexpr LaneShape lane_shape(int tokens, bool words = true) {
  return tuning::lane_shape(Traits::kType, tokens, words);
}
// The lane kernel's shape in the pairs modes (one token per pair; mmvq/lane_pairs.cuh): the
// format's one-token decode choices, items and teams from the pairs split (tuning/tuning.h); an
// item of the gated mode is rows / 2 outputs' gate rows, then their up rows. rows == 0 where the
// one-token lane kernel does not serve the type. few: the split for few items (lane_pairs_few).
template <class Traits>
constexpr LaneShape lane_pairs_shape(bool words, bool gated, bool few = false) {
  LaneShape s = lane_shape<Traits>(1, words);
  if (s.rows == 0) return s;
  const tuning::LanePairsRow split = tuning::lane_pairs_split(Traits::kType, few);
  s.rows = split.rows;  // gated: even (the kernel asserts it), half gate rows, half up rows
  s.team_warps = split.team_warps;
  s.pairs = split.paired_rounds && (split.paired_in == tuning::WordsKernel::kBoth ||
                                    (split.paired_in == tuning::WordsKernel::kWordsOnly) == words);
  s.select_prefetch = false;
  s.prefetch_ahead = split.prefetch_ahead;
  s.table_kb = split.table_kb;
  s.sign_table = split.sign_table;
  s.staged = split.staged;
  return s;
}

// The copies of the grid table a lane kernel of shape s builds (LaneShape's table_kb).
template <class Traits>
constexpr int lane_grid_copies(const LaneShape& s) {
  const int copies = s.table_kb > 0 ? grid_copies<Traits>(s.table_kb * 1024) : kGridCopies<Traits>;
  return copies < kGridCopies<Traits> ? copies : kGridCopies<Traits>;
}

// Whether the lane kernel reads its grid copy through an opaque address (replicated_int8_codebooks;
// the exceptions are tuning rows).
template <class Traits>
constexpr bool lane_grid_opaque_copy(bool words) {
  return tuning::lane_grid_opaque_copy(Traits::kType, words);
}

// The shared-memory span of a staged row's unit of `unit_bytes` that starts a multiple of
// `start_align` bytes past a 16-byte boundary: whole 16-byte pieces from that boundary, an odd
// number of them. Lanes read rows g = 0..7 of a stage at once: an odd count puts the eight rows in
// eight different bank groups (an even count gave 2- to 8-way conflicts, e.g. IQ3_XXS).
constexpr int row_span_bytes(int unit_bytes, int start_align) {
  return 16 * (((unit_bytes + (16 - start_align) + 15) / 16) | 1);
}

// Where a 256-weight unit of a row starts past a 16-byte boundary: a multiple of this for every
// weight the entry points accept (data 16-byte aligned, row and expert strides multiples of the
// format's kAlign: check_weight, moe_api.cu).
template <class Traits>
inline constexpr int kUnitStartAlign =
    std::gcd(16, std::gcd(Traits::kAlign, 256 / Traits::kBlockElems * Traits::kBlockBytes));

// The bf16 tensor-core MMVQ (mmvq/bf16_kernel.cuh) and the weight staging it shares with the int8
// kernel: a block owns 16 rows, its warps split K into 256-weight units streamed through rings.
template <class Traits>
struct MmvqTiling {
  static constexpr int kRows = 16;
  static constexpr int kUnitElems = 256;
  static constexpr int kBlocksPerUnit = kUnitElems / Traits::kBlockElems;
  static constexpr int kUnitBytes = kBlocksPerUnit * Traits::kBlockBytes;
  static constexpr int kSpanBytes = row_span_bytes(kUnitBytes, kUnitStartAlign<Traits>);
  static constexpr int kChunks = kSpanBytes / 16;
  static constexpr int kStageBytes = kRows * kSpanBytes;
  static constexpr int kStages = kStageBytes <= 3072 ? 3 : 2;
  static constexpr int kWarpBytes = kStages * kStageBytes;
  // Warps (K slices) per 16-row tile: an N = 4096 layer is 256 blocks, all resident at two blocks
  // per SM (<= 128 registers per thread). 16 warps at <= 64 registers was measured slower.
  static constexpr int kWarps = 8;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kCodebookBytes = codebook_bytes(Traits::kCodebook);
  static constexpr int reduce_bytes(int tiles) { return kWarps * tiles * 4 * 32 * 4; }
  static constexpr int smem_bytes(int tiles) {
    const int staging = kWarps * kWarpBytes;
    return kCodebookBytes + (staging > reduce_bytes(tiles) ? staging : reduce_bytes(tiles));
  }
};

// The int8 tensor-core MMVQ (mmvq/int8_kernel.cuh).
template <class Traits, int kMaxTokens>
struct MmvqInt8Tiling : MmvqTiling<Traits> {
  using Base = MmvqTiling<Traits>;
  static constexpr int kTableBytes = kInt8TableBytes<Traits>;
  // Two stages per warp: with up to 14 warps per block (two blocks per SM), a unit takes a warp
  // longer than a DRAM round trip, so one unit in flight suffices (and fits shared memory).
  // A stage holds the 16 rows' bytes, then the unit's int8 activations [token][256] and its
  // activation scales [sub-block][8 tokens].
  static constexpr int kStages = 2;
  static constexpr int kActBytes = kMaxTokens * 256;
  static constexpr int kSlotBytes = Base::kStageBytes + kActBytes + 256;
  static constexpr int kWarpBytes = kStages * kSlotBytes;
  static constexpr int kMaxWarps = 14;  // __launch_bounds__: two blocks of 448 threads at <= 72 registers
  // Pairs mode (the MoE vector projection; mmvq_pairs.cuh): its blocks are many (pairs x tiles), so
  // small blocks (up to 4 warps, each streaming two or more units where K has them) and five per
  // SM, at <= 96 registers: holding a pair's expert and rows took the instances past 72 (spills at
  // two blocks of 448 threads, and still at three of 256).
  static constexpr int kPairsMaxWarps = 4;
  static constexpr int kPairsBlocksPerSm = 5;
  static constexpr int smem_bytes(int warps) {
    return kTableBytes + (warps * kWarpBytes > warps * 512 ? warps * kWarpBytes : warps * 512);
  }
};

inline constexpr int kLaneBlockWarps = 32;  // __launch_bounds__: one block of 1024 threads at 64 registers

// The dp4a lane MMVQ (mmvq/lane_kernel.cuh).
template <class Traits>
struct MmvqLaneTiling {
  static_assert(Traits::kI8ScaleElems == 32 || Traits::kI8Order == I8Order::kContiguous,
                "16-weight scales: groups 0, 1 of a sub-block are its first 16 weights");
  static constexpr int kSubsPerBlock = Traits::kBlockElems / 32;
  static_assert(32 % kSubsPerBlock == 0, "a lane keeps its sub-block of the format block across rounds");
  static constexpr int kScalesPerSub = 32 / Traits::kI8ScaleElems;  // 1, or 2 (16-weight scales)
  static constexpr int grid_table_bytes(const LaneShape& s) {       // whole 16-byte words
    return kInt8TableBytes<Traits> * lane_grid_copies<Traits>(s);
  }
  // the grid's copies, then as many copies of the sign masks (LaneShape's sign_table; two words
  // for each of 128 codes: build_sign_masks)
  static constexpr int table_bytes(const LaneShape& s) {
    return grid_table_bytes(s) + (s.split_signs && s.sign_table ? 128 * 8 * lane_grid_copies<Traits>(s) : 0);
  }
  // bytes a warp's round advances its pointers by (whole format blocks)
  static constexpr int64_t kStepBytes = 32 / kSubsPerBlock * static_cast<int64_t>(Traits::kBlockBytes);
  // Staged rounds (LaneShape's staged): the rounds one stage unit of a row holds, the fewest whose
  // bytes are whole 16-byte units (one for IQ4_XS's 544-byte rounds, two for IQ2_XXS's 264), and
  // those bytes: a stage of the ring holds one such unit of each of the team's rows.
  static constexpr int kStageRounds = static_cast<int>(16 / std::gcd(int64_t{16}, kStepBytes));
  static constexpr int64_t kStageUnitBytes = kStageRounds * kStepBytes;
  // The table, then the activation codes [tokens][K] (each sub-block's two 16-byte halves swapped
  // in every other run of four sub-blocks, so that eight lanes' 16-byte reads of consecutive
  // sub-blocks meet 32 distinct banks), then their scales [K / 32][tokens].
  // Last, the partial sums of teams of several warps (two sets each), for lane_shape(kTokens).
  template <int kTokens>
  static constexpr int64_t smem_bytes(int64_t k, int teams) {
    constexpr LaneShape kShape = lane_shape<Traits>(kTokens);
    constexpr int kPartials = kShape.team_warps > 1 ? 2 * kShape.team_warps * kShape.rows * kTokens : 0;
    return table_bytes(kShape) + kTokens * k + k / 32 * kTokens * 4 + teams * kPartials * 4;
  }
  // The pairs mode's (one token per pair; kFew: the split for few items): `rows` activation rows.
  template <bool kGated, bool kFew = false>
  // staged: with the staged rounds' rings (the launch runs them: LaneShape's staged, sm_90, rounds
  // in 16-byte units).
  static constexpr int64_t pairs_smem_bytes(int64_t k, int64_t rows, int teams, bool staged = false) {
    constexpr LaneShape kShape = lane_pairs_shape<Traits>(true, kGated, kFew);
    constexpr int kPartials = kShape.team_warps > 1 ? 2 * kShape.team_warps * kShape.rows : 0;
    return table_bytes(kShape) + rows * k + k / 32 * rows * 4 + teams * kPartials * 4 +
           (staged && kShape.staged ? 128 + teams * stage_ring_bytes(kShape, kGated) : 0);
  }
  // The staged rounds' copies are boxes of a tensor map: a stage unit of an item's rows (gated, of
  // half of them: the gate rows', then the up rows'), each at a slot of its own, 128-byte aligned
  // as tensor copies into shared memory must be.
  static constexpr int stage_boxes(bool gated) { return gated ? 2 : 1; }
  static constexpr int64_t stage_slot_bytes(const LaneShape& s, bool gated) {
    return (s.rows / stage_boxes(gated) * kStageUnitBytes + 127) / 128 * 128;
  }
  // A team's ring of two stages (LaneShape's staged: one-warp teams), then its two stage
  // barriers, in 128-byte units so that every team's ring is aligned when the first is (the rings
  // start at the first 128-byte boundary after the partial sums: pairs_smem_bytes plans 128 bytes
  // for it).
  static constexpr int64_t stage_ring_bytes(const LaneShape& s, bool gated) {
    return (2 * stage_boxes(gated) * stage_slot_bytes(s, gated) + 16 + 127) / 128 * 128;
  }
  // Whether the rows are whole 16-byte units (a row's bytes, every row's and expert's start): the
  // rows the staged kernel is measured and tested on. Its tensor copies need the start and strides
  // so (encode_word_map_3d checks them again for any map); a row's bytes they would not.
  static bool rows_in_16_byte_units(const void* w, int64_t k, int64_t row_stride, int64_t expert_stride) {
    static_assert(kStageUnitBytes % 16 == 0, "whole 16-byte units");
    const int64_t row_bytes = k / Traits::kBlockElems * Traits::kBlockBytes;
    return ((reinterpret_cast<uintptr_t>(w) | static_cast<uint64_t>(row_stride) | static_cast<uint64_t>(expert_stride) |
             static_cast<uint64_t>(row_bytes)) &
            15) == 0;
  }
};

// Shared memory a device offers, from its facts (0 where unknown: the pre-Volta default).
inline int shared_per_block(const DeviceFacts& d) {
  return d.shared_per_block_optin > 0 ? d.shared_per_block_optin : 48 * 1024;
}
inline int shared_per_sm(const DeviceFacts& d) {
  return d.shared_per_sm > 0 ? d.shared_per_sm : 96 * 1024;
}

// K slices per 16-row tile of the int8 kernel: as few units per warp as possible (the block's
// makespan), then as few warps as reach it, within `budget` bytes of shared memory per block.
// K = 14336 (56 units) on an H200: 14 warps of 4 units. 0 when not even one warp fits.
template <class Tl>
int int8_warps_per_tile(int64_t k, int budget, int max_warps = Tl::kMaxWarps) {
  const int units = static_cast<int>((k + Tl::kUnitElems - 1) / Tl::kUnitElems);
  int best = 0;
  for (int w = 1; w <= max_warps && Tl::smem_bytes(w) <= budget; ++w)
    if (best == 0 || (units + w - 1) / w < (units + best - 1) / best) best = w;
  return best;
}

// Warps per tile of the int8 tensor-core MMVQ for K on this device: two blocks per SM where they
// fit (the SM's memory less 1 KB per block), else one; 0 where not even one warp's ring fits.
template <class Traits, int kMaxTokens>
int int8_mma_warps(int64_t k, const DeviceFacts& device) {
  using Tl = MmvqInt8Tiling<Traits, kMaxTokens>;
  const int warps = int8_warps_per_tile<Tl>(k, shared_per_sm(device) / 2 - 1024);
  return warps >= 4 ? warps : int8_warps_per_tile<Tl>(k, shared_per_block(device));
}

// Warps per tile of the int8 kernel's pairs mode (one token) for K on this device: kPairsBlocksPerSm
// blocks per SM where they fit, else one; 0 where not even one warp's ring fits.
template <class Traits>
int int8_pairs_warps(int64_t k, const DeviceFacts& device) {
  using Tl = MmvqInt8Tiling<Traits, 1>;
  const int warps =
      int8_warps_per_tile<Tl>(k, shared_per_sm(device) / Tl::kPairsBlocksPerSm - 1024, Tl::kPairsMaxWarps);
  return warps > 0 ? warps : int8_warps_per_tile<Tl>(k, shared_per_block(device), Tl::kPairsMaxWarps);
}

// The lane kernel's grid for N x K and kTokens tokens on this device: one block per SM (fewer
// where the row groups are fewer), teams per block the fewest that cover the groups; fits is
// false where a block's shared memory cannot hold the activations.
struct LaneGrid {
  bool fits;
  unsigned blocks;
  int threads;
  int smem;
};
template <class Traits, int kTokens>
LaneGrid lane_grid(int64_t n, int64_t k, const DeviceFacts& device) {
  using Tl = MmvqLaneTiling<Traits>;
  constexpr LaneShape kShape = lane_shape<Traits>(kTokens);
  constexpr int kMaxTeams = kLaneBlockWarps / kShape.team_warps;
  const int64_t groups = (n + kShape.rows - 1) / kShape.rows;
  const int64_t sms = device.multiprocessors > 0 ? device.multiprocessors : 1;
  int64_t teams = (groups + sms - 1) / sms;
  teams = teams < 1 ? 1 : (teams > kMaxTeams ? kMaxTeams : teams);
  const int64_t smem = Tl::template smem_bytes<kTokens>(k, static_cast<int>(teams));
  // Blocks beyond one per SM would wait for a second wave (teams then loop over the groups): with
  // fewer teams than the most a block takes, the blocks are fewer than the SMs anyway, and with
  // the most (1024 threads at 64 registers: a whole register file) one block fills an SM.
  const int64_t need = (groups + teams - 1) / teams;
  return {smem <= shared_per_block(device), static_cast<unsigned>(need < sms ? need : sms),
          static_cast<int>(32 * kShape.team_warps * teams), static_cast<int>(smem)};
}

// The lane kernel's pairs-mode grid (mmvq/lane_pairs.cuh) for `pairs` one-token pairs over
// experts of N rows (2n' gated) and K, activation row p / divisor for pair p: teams per block the
// fewest that cover the items over the SMs, one block per SM, each a run of items_per_block items;
// runs shorter where a run's activation rows would not fit a block's shared memory. fits is false
// where not even one row fits, or the items reach 2^32.
struct LanePairsGrid {
  bool fits;
  unsigned blocks;
  int threads;
  int smem;
  int64_t items_per_block;
};
template <class Traits, bool kGated, bool kFew = false>
LanePairsGrid lane_pairs_grid(int64_t n, int64_t k, int64_t pairs, int64_t divisor, const DeviceFacts& device,
                              bool staged = false) {
  using Tl = MmvqLaneTiling<Traits>;
  constexpr LaneShape kShape = lane_pairs_shape<Traits>(true, kGated, kFew);
  constexpr int kMaxTeams = kLaneBlockWarps / kShape.team_warps;
  const int64_t per_pair = lane_items_per_pair(n, kGated, kShape.rows);
  const int64_t items = pairs * per_pair;
  if (items <= 0) return {false, 0, 0, 0, 0};
  const int64_t total_rows = (pairs + divisor - 1) / divisor;
  const int64_t sms = device.multiprocessors > 0 ? device.multiprocessors : 1;
  int64_t teams = (items + sms - 1) / sms;
  teams = teams < 1 ? 1 : (teams > kMaxTeams ? kMaxTeams : teams);
  const int64_t wanted_blocks = (items + teams - 1) / teams;
  const int64_t blocks = wanted_blocks < sms ? wanted_blocks : sms;
  int64_t run = (items + blocks - 1) / blocks;
  auto smem_for = [&](int64_t r, int64_t t) {
    return Tl::template pairs_smem_bytes<kGated, kFew>(k, lane_max_block_rows(r, per_pair, divisor, total_rows),
                                                       static_cast<int>(t), staged);
  };
  while (run > 1 && smem_for(run, teams) > shared_per_block(device)) run = (run + 1) / 2;
  if (teams > run) teams = run;  // a short run leaves no work for more teams
  const int64_t smem = smem_for(run, teams);
  const int64_t grid = (items + run - 1) / run;
  // (items divide in 32 bits in the kernel; the grid's x is below 2^31)
  const bool fits = smem <= shared_per_block(device) && items < (int64_t{1} << 32) && grid <= (int64_t{1} << 31) - 1;
  return {fits, static_cast<unsigned>(fits ? grid : 0), static_cast<int>(32 * kShape.team_warps * teams),
          static_cast<int>(smem), run};
}

// Whether the type has a split of its own for few items (tuning::kLanePairsFewRows) that differs
// from its common one: only then is a second kernel instantiated.
template <class Traits>
constexpr bool lane_pairs_has_few() {
  const LaneShape common = lane_pairs_shape<Traits>(true, false), few = lane_pairs_shape<Traits>(true, false, true);
  return common.rows > 0 && (common.rows != few.rows || common.team_warps != few.team_warps ||
                             common.pairs != few.pairs || common.prefetch_ahead != few.prefetch_ahead);
}

// Whether `pairs` pairs over N rows (2n' gated) are few: their items at the split for few items
// still fit one wave of teams (one block per SM, lane_pairs_grid, each holding its most teams), so
// that every item has a warp of its own from the start; past one wave the common split's larger
// items keep more loads in flight per warp (NOTES.md, "few items"). False where the type has no
// such split.
template <class Traits, bool kGated>
bool lane_pairs_few(int64_t n, int64_t pairs, const DeviceFacts& device) {
  if constexpr (!lane_pairs_has_few<Traits>()) {
    return false;
  } else {
    constexpr LaneShape kFew = lane_pairs_shape<Traits>(true, kGated, true);
    constexpr int kMaxTeams = kLaneBlockWarps / kFew.team_warps;
    const int64_t sms = device.multiprocessors > 0 ? device.multiprocessors : 1;
    return pairs * lane_items_per_pair(n, kGated, kFew.rows) <= sms * kMaxTeams;
  }
}

}  // namespace lowbit::cuda_detail
