// MMVQ of one to four tokens on dp4a: each thread owns whole 32-weight sub-blocks.
//
// With one or two tokens the tensor-core MMVQ (int8_kernel.cuh) spends most of its
// instructions moving weights through shared memory and filling mma columns that the tokens leave
// empty; the decode is the only work they need. Here a team of one or two warps works on one or
// two rows at a time over the whole K (lane_shape, per format): thread i of the team takes
// sub-blocks i, i + T, ... (T threads) and decodes each one's four int8 groups straight from
// global memory with decode_i8_in_sub_block (the format's decode_i8, or its whole-sub-block read
// where it has one, lane_reads.h, and lane_shape asks for it; at one token the IQ4 formats' groups come as two
// dp4a addends, kAddends; every weight byte is read by one thread; a warp's loads of a round
// cover a contiguous run of the row), multiplies them with dp4a against each
// token's activation codes (loaded once for the team's rows), and scales the sub-block's int32
// sums once (twice for formats with 16-weight scales). A team's warps then sum by shuffles and,
// for two-warp teams, through shared memory behind the team's own named barrier, in a fixed order.
//
// One or two tokens' activations are quantized inside the kernel: each block quantizes all of
// them (the int8 form of int8_activations.cuh) into its shared memory before its warps start,
// which costs one L2 read of the activations per block instead of a second kernel whose
// completion the MMVQ kernel would wait for (slower at M = 1, 2 even with a programmatic launch;
// NOTES.md). Three or four tokens' would cost every SM that quantization three or four times
// over: there the int8 prologue kernel quantizes them once and each block copies its output. The grid
// is one block per SM (1024 threads at 64 registers fill its register file), so the activations
// and the codebook table (kGridCopies copies of each entry, codebook_sizes.h) are built once per SM; team t of block
// b takes row groups b * teams + t, then every gridDim.x * teams further.
//
// Pairs mode (kMode, MmvqPairs in mmvq_args.h: the MoE vector projection, one token per pair): the
// same body over (pair, row group) items of their own shape (lane_pairs_shape: four rows for a
// one-warp team), each block a run of consecutive items that quantizes just its pairs' activation
// rows (lane_pairs.cuh); each pair's expert comes from the router's ids, so that the projection
// is one kernel: no expert table, no prologue.
#pragma once

#include <cuda.h>

#include "cuda/common/activation.cuh"
#include "cuda/common/device_codebooks.cuh"
#include "cuda/common/int8_activations.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/mmvq/lane_pairs.cuh"
#include "cuda/mmvq/lane_reads.h"
#include "cuda/mmvq/mmvq_args.h"
#include "cuda/mmvq/mmvq_tiling.h"
#include "cuda/mmvq/row_pipeline.cuh"

namespace lowbit::cuda_detail {

// Byte offset of the 16-byte half `half` of sub-block j in a token's codes (see MmvqLaneTiling).
__device__ __forceinline__ int lane_code_offset(int j, int half) {
  return 32 * j + 16 * (half ^ ((j >> 2) & 1));
}

__device__ __forceinline__ int dp4a(uint32_t a, uint32_t b, int c) {
  return __dp4a(static_cast<int>(a), static_cast<int>(b), c);
}

// Sums each of the kN values over the warp's 32 lanes. Lanes exchange half of their values at
// each step (the half whose index bit differs from theirs), so kN values cost kN - 1 shuffles
// instead of 5 kN; value `index` ends in the lanes whose low log2(kN) bits spell it bit-reversed
// (the first step's lane bit 0 picks the upper half, index bit kN / 2: with kN = 4, lane 1 holds
// value 2), and the last steps sum it over the remaining lane bits. Returns this lane's value.
template <int kN>
__device__ __forceinline__ float warp_sum_spread(float (&v)[kN], int lane, int& index) {
  static_assert((kN & (kN - 1)) == 0 && kN <= 32, "a power of two up to 32 values");
  index = 0;
  int bit = 1;
#pragma unroll
  for (int count = kN; count > 1; count /= 2, bit *= 2) {
    const bool upper = lane & bit;
#pragma unroll
    for (int i = 0; i < count / 2; ++i) {
      const float send = upper ? v[i] : v[i + count / 2];
      const float keep = upper ? v[i + count / 2] : v[i];
      v[i] = keep + __shfl_xor_sync(0xFFFFFFFFu, send, bit);
    }
    if (upper) index += count / 2;
  }
  float s = v[0];
#pragma unroll
  for (; bit < 32; bit *= 2) s += __shfl_xor_sync(0xFFFFFFFFu, s, bit);
  return s;
}

// The block quantizes activation rows first_row .. first_row + rows - 1 into `codes` / `scales`
// (layout of MmvqLaneTiling): kTokens (1 or 2) tokens from row 0, or with kTokens == 0 any number
// of rows, their scales row by row ([row][K / 32], the pairs mode's layout; at one row both are
// the same). Thread items are (row, int8 group), whole sub-blocks per four lanes.
// after_first_loads() runs once (where there is anything to quantize), between the first values'
// loads and their use.
template <class Act, I8Order kOrder, int kTokens, class AfterFirstLoads>
__device__ __forceinline__ void quantize_into_shared(const MmvqArgs& a, int first_row, int rows, uint8_t* codes,
                                                     float* scales, AfterFirstLoads&& after_first_loads) {
  static_assert(kTokens >= 0 && kTokens <= 2, "one or two tokens, or rows counted at run time");
  const int groups = static_cast<int>(a.k / 8);
  const int items = (kTokens > 0 ? kTokens : rows) * groups;  // a multiple of 4
  for (int base = 0; base < items; base += blockDim.x) {
    const int i = base + static_cast<int>(threadIdx.x);
    const bool active = i < items;  // whole warps run quantize8 (it shuffles within quads)
    // (one or two tokens: a comparison instead of an integer division, ~30 instructions)
    const int token = kTokens == 1 ? 0 : kTokens == 2 ? (i < groups ? 0 : 1) : (active ? i / groups : 0);
    const int group = active ? i - token * groups : 0;
    float v[8] = {};
    if (active) load_i8_group<Act, kOrder>(a, kTokens > 0 ? token : first_row + token, group, v);
    if (base == 0) after_first_loads();
    uint32_t q[2];
    const float d = quantize8(v, q);
    if (active) {
      const int j = group >> 2, t = group & 3;
      *reinterpret_cast<uint2*>(codes + token * a.k + lane_code_offset(j, t >> 1) + 8 * (t & 1)) =
          make_uint2(q[0], q[1]);
      if (t == 0) scales[kTokens > 0 ? j * kTokens + token : token * (groups / 4) + j] = d;
    }
  }
}

// Four tokens: the block copies the prologue's codes (a.xq, a.xs; int8_activations.cuh) into
// `codes` / `scales` (layout of MmvqLaneTiling), tokens past M as zeros. Quantizing four tokens in
// every block would cost each SM the whole quantization four times over.
template <int kTokens>
__device__ __forceinline__ void copy_prologue_codes(const MmvqArgs& a, uint8_t* codes, float* scales) {
  const int pieces = static_cast<int>(a.k / 16);  // 16-byte halves of sub-blocks per token
#pragma unroll
  for (int m = 0; m < kTokens; ++m) {
    for (int p = static_cast<int>(threadIdx.x); p < pieces; p += blockDim.x) {
      const uint4 v = m < a.m ? *reinterpret_cast<const uint4*>(a.xq + m * a.k + 16 * p) : make_uint4(0, 0, 0, 0);
      *reinterpret_cast<uint4*>(codes + m * a.k + lane_code_offset(p >> 1, p & 1)) = v;
    }
  }
  static_assert(kTokens == 4, "the scales of four tokens are one 16-byte piece");
  for (int j = static_cast<int>(threadIdx.x); j < a.k / 32; j += blockDim.x)
    *reinterpret_cast<float4*>(scales + 4 * j) = *reinterpret_cast<const float4*>(a.xs + 8 * j);
}

__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// The shape of the kernel below in a mode: the pairs modes' own (kFew: the split for few items),
// or the dense one of kTokens.
template <class Traits, int kTokens, MmvqMode kMode, bool kFew>
constexpr LaneShape lane_kernel_shape(bool words) {
  return kMode == MmvqMode::kDense ? lane_shape<Traits>(kTokens, words)
                                   : lane_pairs_shape<Traits>(words, kMode == MmvqMode::kGatedPairs, kFew);
}

// kTokens (1, 2, or 4 for M = 3, 4) >= M; the shape is lane_kernel_shape (the tuning tables,
// tuning/sm90.h). kWords: the format's blocks are read as aligned words
// (HasLaneWords; the launch checks that the row's blocks pair into 4-byte-aligned spans): fewer
// load instructions per block (benchmarks/NOTES.md, "blocks read as aligned words").
// kMode: dense, or the pairs modes over routed one-token pairs (lane_pairs.cuh), whose items have
// their own shape (lane_pairs_shape; gated: kRows / 2 outputs' gate rows, then their up rows;
// kFewPairs: the split for few items, lane_pairs_few; kStagedRounds: the shape's staged rounds,
// where the launch found the rows' rounds in whole 16-byte units and encoded their tensor map).
// The body of both kernels below: the dense one's arguments are MmvqArgs, the pairs modes'
// MmvqPairArgs. w_map (pairs modes, staged rounds): a tensor map of the experts' rows as 32-bit
// words ([experts][n][row words], the launch's encode_stage_map), a box of which is a stage unit of
// an item's rows (gated: of half of them), so that a unit is one copy from one lane.
template <class Traits, class Act, int kTokens, bool kWords, MmvqMode kMode, bool kFewPairs, bool kStagedRounds>
__device__ __forceinline__ void lane_kernel_body(
    const std::conditional_t<kMode == MmvqMode::kDense, MmvqArgs, MmvqPairArgs>& a, const CUtensorMap* w_map) {
  using Tl = MmvqLaneTiling<Traits>;
  constexpr bool kPairs = kMode != MmvqMode::kDense, kGated = kMode == MmvqMode::kGatedPairs;
  static_assert(!kPairs || kTokens == 1, "a pair is one token");
  static_assert(kPairs || !kFewPairs, "the split for few items is the pairs modes'");
  constexpr LaneShape kShape = lane_kernel_shape<Traits, kTokens, kMode, kFewPairs>(kWords);
  constexpr LaneShape kWordsShape = lane_kernel_shape<Traits, kTokens, kMode, kFewPairs>(true);
  static_assert(kShape.rows == kWordsShape.rows && kShape.team_warps == kWordsShape.team_warps &&
                    Tl::table_bytes(kShape) == Tl::table_bytes(kWordsShape),
                "the grid (lane_grid, lane_pairs_grid) and its shared memory are planned for either kernel");
  static_assert(!kGated || kShape.rows % 2 == 0, "gated items: gate rows, then as many up rows");
  constexpr int kRows = kShape.rows, kTeamWarps = kShape.team_warps;
  static_assert(
      kRows > 0 && kLaneBlockWarps % kTeamWarps == 0 && (kTeamWarps == 1 || kLaneBlockWarps / kTeamWarps <= 16),
      "a named barrier per team");
  constexpr int kSums = kRows * kTokens;  // acc[r * kTokens + m]
  // The signs apart from the magnitudes (lane_shape's split_signs): two dp4a per word, one of the
  // magnitudes under the sign mask (sign_byte_mask4), instead of forming the negated bytes.
  constexpr bool kSplitSigns = kShape.split_signs;
  constexpr int kAhead = kShape.prefetch_ahead;
  static_assert(!kShape.select_prefetch || kAhead == 1, "the select form prefetches the next round");
  static_assert(!kSplitSigns || (kTokens == 1 && HasGridI8<Traits>::value), "split signs: one token, grid formats");
  // The split signs' byte masks from the sign-code table (LaneShape's sign_table; the words
  // instance reads the codes, the bytes instance keeps the arithmetic but the same shared layout).
  static_assert(!(kSplitSigns && kShape.sign_table) || HasSignCodes<Traits>::value, "sign table: seven-bit sign codes");
  // Staged rounds (LaneShape's staged, where the launch found every row's stage units in 16-byte
  // units and encoded the weights' tensor map: kStagedRounds): each stage unit (Tl::kStageRounds
  // rounds) of the rows goes into a two-stage ring in shared memory as a tensor copy one unit ahead
  // (stage_round below), and the lanes read their blocks' words from there (sm_90). Paired rounds
  // do not apply there: the ring keeps the next unit in flight.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  constexpr bool kBulkCopies = false;
#else
  constexpr bool kBulkCopies = true;
#endif
  constexpr bool kStaged = kPairs && kShape.staged && kStagedRounds && kBulkCopies;
  static_assert(
      !kStaged || (kShape.team_warps == 1 && !kWords && HasLaneWords<Traits>::value && !Traits::kSplitScales &&
                   (Traits::kBlockBytes % 4 == 0 || (32 / Tl::kSubsPerBlock) % 2 == 0)),
      "staged rounds: one-warp teams, formats with lane words, whole block pairs per round (a lane's phase is "
      "the same in every round)");
  // the decode from lane words: read from global memory (kWords), or from the staged copy
  constexpr bool kReadWords = kWords || kStaged;
  constexpr bool kSignTable = kSplitSigns && kShape.sign_table && kReadWords;
  // One token, formats with addends (IQ4_NL, IQ4_XS through nibble_lookup_addends): four dp4a per
  // group instead of two, and a third fewer integer-ALU instructions to form the bytes (NOTES.md,
  // "IQ4 lookups as addends"); IQ4_XS's through its 64-bit code reads where the shape asks for
  // whole sub-blocks (kWideAddends). Not at two tokens, where each word would feed four dp4a.
  constexpr bool kAddends = kTokens == 1 && HasI8Addends<Traits>::value;
  constexpr bool kWideAddends = kAddends && kShape.whole_sub && HasWholeSubAddends<Traits>::value;
  constexpr int kTeamThreads = 32 * kTeamWarps;
  constexpr int64_t kStep = Tl::kStepBytes * kTeamWarps;  // a thread's row bytes per round
  extern __shared__ __align__(16) uint8_t smem[];
  const int lane = static_cast<int>(threadIdx.x & 31), warp = static_cast<int>(threadIdx.x >> 5);
  const int team = warp / kTeamWarps, member = warp % kTeamWarps;
  const int tid = member * 32 + lane;  // thread in the team
  const int teams = static_cast<int>(blockDim.x >> 5) / kTeamWarps;
  const int subs = static_cast<int>(a.k / 32);
  // The team's groups: dense, row groups blockIdx.x * teams + team, then every gridDim.x * teams
  // further; pairs, the items of the block's run in turn (lane_pairs.cuh).
  int64_t groups, group_step, group;
  LaneBlockRows x_rows{0, kTokens};  // the activation rows in shared memory
  // (pairs mode: fewer than 2^32 items, checked at launch, so that items divide in 32 bits)
  [[maybe_unused]] uint32_t per_pair = 0;
  [[maybe_unused]] int first_x_row = 0;
  [[maybe_unused]] LaneCursor cursor{};  // pairs: the team's item `group`
  if constexpr (kPairs) {
    per_pair = static_cast<uint32_t>(lane_items_per_pair(a.n, kGated, kRows));
    const int64_t items = a.pairs.count * per_pair;
    const int64_t begin = static_cast<int64_t>(blockIdx.x) * a.pairs.items_per_block;
    groups = begin + a.pairs.items_per_block < items ? begin + a.pairs.items_per_block : items;
    group_step = teams;
    group = begin + team;
    // (items and the divisor below 2^32: the launch)
    x_rows = lane_block_rows<uint32_t>(static_cast<uint32_t>(begin), static_cast<uint32_t>(groups), per_pair,
                                       static_cast<uint32_t>(a.pairs.x_pair_divisor));
    first_x_row = static_cast<int>(x_rows.first);
    cursor = lane_cursor(a, static_cast<uint32_t>(group), per_pair, first_x_row);
  } else {
    groups = (a.n + kRows - 1) / kRows;
    group_step = static_cast<int64_t>(gridDim.x) * teams;
    group = static_cast<int64_t>(blockIdx.x) * teams + team;
  }
  uint8_t* const codes = smem + Tl::table_bytes(kShape);
  float* const code_scales = reinterpret_cast<float*>(codes + x_rows.count * a.k);
  float* const partials = code_scales + a.k / 32 * x_rows.count;  // [team][parity][member][kSums]
  // staged rounds: this team's ring of two stages, each kBoxes slots of a box of kBoxRows rows'
  // stage units (Tl::stage_slot_bytes), then its two barriers; the rings from the first 128-byte
  // boundary after the partial sums
  constexpr int kBoxes = Tl::stage_boxes(kGated), kBoxRows = kRows / kBoxes;
  constexpr int64_t kSlot = Tl::stage_slot_bytes(kShape, kGated);
  [[maybe_unused]] uint64_t* stage_bars = nullptr;
  [[maybe_unused]] uint8_t* stage_ring = nullptr;
  if constexpr (kStaged) {
    // (as an offset from smem, so that the compiler sees shared memory and reads it by LDS)
    const auto end =
        reinterpret_cast<const uint8_t*>(partials + (kTeamWarps > 1 ? teams * 2 * kTeamWarps * kSums : 0)) - smem;
    const uint32_t pad = (0u - (shared_address(smem) + static_cast<uint32_t>(end))) & 127u;
    stage_ring = smem + end + pad + team * Tl::stage_ring_bytes(kShape, kGated);
    stage_bars = reinterpret_cast<uint64_t*>(stage_ring + 2 * kBoxes * kSlot);
  }
  // This thread's sub-blocks j = tid + kTeamThreads i: always sub-block `sub` of a format block,
  // the blocks kStep apart.
  const int sub = tid % Tl::kSubsPerBlock;
  const int64_t thread_byte = tid / Tl::kSubsPerBlock * static_cast<int64_t>(Traits::kBlockBytes);
  const int sub_byte = sub * (Traits::kBlockBytes / Tl::kSubsPerBlock);  // about where its bytes start
  // kWords: a round covers an even number of blocks, so a thread's blocks are all first (odd ==
  // false) or all second of their pair (4-byte-aligned blocks: odd is always false)
  static_assert(!kWords || (HasLaneWords<Traits>::value &&
                            (Traits::kBlockBytes % 4 == 0 || kTeamThreads / Tl::kSubsPerBlock % 2 == 0)),
                "aligned words: blocks 2 mod 4 bytes long come an even number per round");
  // (a stage unit starts where its row's unit does modulo 16, so the phase is the same there)
  const bool odd = kReadWords && Traits::kBlockBytes % 4 == 2 && (tid / Tl::kSubsPerBlock) % 2 == 1;
  // the thread's row pointers point this far into its blocks: lane_anchor, or reading lane words
  // at the 4-byte-aligned address at or before them (lane_words' block4)
  const int anchor = kReadWords ? (odd ? -2 : 0) : lane_anchor<Traits>(sub);
  // rows past N (the last group only) read row 0 and are never stored
  auto row_of = [&](int64_t g, int r) {
    const int64_t row = g * kRows + r;
    return row < a.n ? row : int64_t{0};
  };
  // pairs: the rows of the item at cursor c (a pair without a local expert has none)
  [[maybe_unused]] auto item_of = [&](const LaneCursor& c) {
    if constexpr (kPairs) return lane_item<kGated, kRows>(a, c);
    return LaneItem{};
  };
  [[maybe_unused]] auto item_row = [&](const LaneItem& it, int r) { return lane_item_row<kGated, kRows>(it, r); };
  // Staged rounds: lane 0 arms stage `stage`'s barrier with the bytes of stage unit u of item
  // `it`'s rows and copies them as one box of the weights' tensor map (gated: the gate rows' box,
  // then the up rows'; w_map): box b at slot b of the stage, its row r kUnit * r bytes into it.
  // Rows past the expert's and words past the row's end arrive as zeros and count among the box's
  // bytes; their sums are never stored. Nothing for an item without a local expert (the same for
  // the whole team), whose units are not waited for.
  constexpr int64_t kUnit = Tl::kStageUnitBytes;
  [[maybe_unused]] auto stage_round = [&](const LaneItem& it, int u, int stage) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (kStaged) {
      if (lane != 0 || !it.live) return;
      fence_proxy_async_shared();  // the warp's reads of this stage (behind __syncwarp) before its refill
      mbarrier_arrive_expect_tx(stage_bars + stage, static_cast<uint32_t>(kRows * kUnit));
#pragma unroll
      for (int box = 0; box < kBoxes; ++box)
        tensor_copy_3d_to_shared(stage_ring + (stage * kBoxes + box) * kSlot, w_map, static_cast<int>(u * (kUnit / 4)),
                                 static_cast<int>(it.first + box * it.step), it.expert, stage_bars + stage);
    }
#endif
  };
  [[maybe_unused]] int stage = 0;        // staged rounds: the stage the next round to decode is in
  [[maybe_unused]] uint32_t phases = 0;  // and each stage's barrier phase (bit s)
  // Starts the first round of group g's rows into L2 (pairs: the team's item `ahead` items on,
  // 0 or group_step).
  auto prefetch_group = [&](int64_t g, uint32_t ahead) {
    if (g >= groups || tid >= subs) return;
    if constexpr (kPairs) {
      const LaneItem it = item_of(ahead > 0 ? lane_next_item(a, cursor, ahead, per_pair, first_x_row) : cursor);
      if (it.live)
#pragma unroll
        for (int r = 0; r < kRows; ++r) prefetch_l2(it.w + item_row(it, r) * a.w_row_stride + thread_byte + sub_byte);
    } else {
#pragma unroll
      for (int r = 0; r < kRows; ++r) prefetch_l2(a.w + row_of(g, r) * a.w_row_stride + thread_byte + sub_byte);
    }
  };
  // The next kernel in the stream may launch now (where SM space is free); it reads nothing this
  // kernel writes before its own wait (programmatic launches, sm_90).
  pdl_launch_dependents();
  // Weights and the codebook table do not depend on the kernel before (the activations and the
  // output may): they start while it finishes. (Pairs: which weights depends on the routing's ids,
  // which the kernel before may write: their first lines start after the wait, behind the
  // activation loads, which would otherwise queue behind them: NOTES.md.)
  if constexpr (!kPairs) prefetch_group(group, 0);
  const Codebooks cb =
      replicated_int8_codebooks<Traits, lane_grid_copies<Traits>(kShape), lane_grid_opaque_copy<Traits>(kReadWords)>(
          smem);
  // The sign masks after the grid, laid out like it: a lane's sit at a constant offset from its
  // grid copy, so a lookup needs no second per-lane address.
  constexpr int kGridCopiesHere = lane_grid_copies<Traits>(kShape);
  constexpr int kGridEntryBytes = codebook_entry_bytes(Traits::kCodebook);
  [[maybe_unused]] const uint8_t* sign_copy = nullptr;
  if constexpr (kSignTable) {
    build_sign_masks<kGridEntryBytes, kGridCopiesHere>(smem + Tl::grid_table_bytes(kShape));
    sign_copy = static_cast<const uint8_t*>(grid_table<Traits::kCodebook>(cb)) + Tl::grid_table_bytes(kShape);
  }
  pdl_wait_for_primary();
  if constexpr (kPairs) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (kStaged) {
      if (lane == 0) {
        mbarrier_init(stage_bars, 1);
        mbarrier_init(stage_bars + 1, 1);
        fence_mbarrier_init();
      }
      __syncwarp();
    }
#endif
    quantize_into_shared<Act, Traits::kI8Order, 0>(a, first_x_row, x_rows.count, codes, code_scales, [&] {
      if constexpr (kStaged) {
        if (group < groups) stage_round(item_of(cursor), 0, 0);
      } else {
        prefetch_group(group, 0);
      }
    });
  } else if constexpr (kTokens <= 2)
    quantize_into_shared<Act, Traits::kI8Order, kTokens>(a, 0, kTokens, codes, code_scales, [] {});
  else
    copy_prologue_codes<kTokens>(a, codes, code_scales);
  __syncthreads();

  const int lo_half = lane_code_offset(tid, 0), hi_half = lane_code_offset(tid, 1);
  for (int parity = 0; group < groups; group += group_step, parity ^= 1) {
    if constexpr (!kStaged) prefetch_group(group + group_step, static_cast<uint32_t>(group_step));
    const uint8_t* w[kRows];
    const uint8_t* split_scale[kRows];
    [[maybe_unused]] LaneItem item;
    if constexpr (kPairs) {
      item = item_of(cursor);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        w[r] = item.w + item_row(item, r) * a.w_row_stride + thread_byte + anchor;
        split_scale[r] = Traits::kSplitScales ? item.scales + item_row(item, r) * a.scale_row_stride + tid : nullptr;
      }
    } else {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        w[r] = a.w + row_of(group, r) * a.w_row_stride + thread_byte + anchor;
        split_scale[r] = Traits::kSplitScales ? a.scales + row_of(group, r) * a.scale_row_stride + tid : nullptr;
      }
    }
    const uint8_t* lo = codes + lo_half;
    const uint8_t* hi = codes + hi_half;
    [[maybe_unused]] const float* x_scales = code_scales;  // pairs: the item's activation row's scales
    if constexpr (kPairs) {
      lo += item.x_row * a.k;
      hi += item.x_row * a.k;
      x_scales += item.x_row * subs;
    }
    float acc[kSums] = {};
    // sub-block j of the rows, `step` rounds past w / split_scale / lo / hi
    auto add_sub_block = [&](int j, int step) {
      // the sub-block's activation codes (words 2t, 2t + 1: group t) and scale, per token
      // (four tokens: a half at a time where used, 32 registers of codes at once would spill)
      constexpr bool kWholeX = kTokens <= 2;
      uint32_t x[kWholeX ? kTokens : 1][8];
      float x_scale[kTokens];
      if constexpr (kWholeX) {
#pragma unroll
        for (int m = 0; m < kTokens; ++m) {
          const uint4 l = *reinterpret_cast<const uint4*>(lo + step * 32 * kTeamThreads + m * a.k);
          const uint4 h = *reinterpret_cast<const uint4*>(hi + step * 32 * kTeamThreads + m * a.k);
          x[m][0] = l.x, x[m][1] = l.y, x[m][2] = l.z, x[m][3] = l.w;
          x[m][4] = h.x, x[m][5] = h.y, x[m][6] = h.z, x[m][7] = h.w;
        }
      }
      // four tokens: the 16-byte half of each token's codes that groups t, t + 1 (t even) use, as
      // one read (8-byte reads of the swizzled layout meet bank conflicts)
      uint4 x_half[kWholeX ? 1 : kTokens] = {};
      auto load_half = [&](int t) {
        if constexpr (!kWholeX)
#pragma unroll
          for (int m = 0; m < kTokens; ++m)
            x_half[m] = *reinterpret_cast<const uint4*>((t < 2 ? lo : hi) + step * 32 * kTeamThreads + m * a.k);
      };
      // token m's codes of group t: words 2t, 2t + 1
      auto x_group = [&](int m, int t) {
        if constexpr (kWholeX) return make_uint2(x[m][2 * t], x[m][2 * t + 1]);
        return t & 1 ? make_uint2(x_half[m].z, x_half[m].w) : make_uint2(x_half[m].x, x_half[m].y);
      };
      if constexpr (kTokens == 4) {
        const float4 s = *reinterpret_cast<const float4*>(code_scales + 4 * j);
        x_scale[0] = s.x, x_scale[1] = s.y, x_scale[2] = s.z, x_scale[3] = s.w;
      } else if constexpr (kTokens == 2) {
        const float2 s = *reinterpret_cast<const float2*>(code_scales + 2 * j);
        x_scale[0] = s.x, x_scale[1] = s.y;
      } else {
        x_scale[0] = kPairs ? x_scales[j] : code_scales[j];
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        uint8_t split = 0;
        if constexpr (Traits::kSplitScales) split = split_scale[r][step * kTeamThreads];
        const BlockRef b{w[r] + step * kStep - anchor, split};
        [[maybe_unused]] typename LaneWordsOf<Traits>::type words{};
        if constexpr (kStaged)
          words = LaneReadsOf<Traits>::template lane_words<true>(w[r] + step * kStep, sub, odd);
        else if constexpr (kWords)
          words = LaneReadsOf<Traits>::lane_words(w[r] + step * kStep, sub, odd);
        int sum[kTokens][Tl::kScalesPerSub] = {};
        [[maybe_unused]] int negated[Tl::kScalesPerSub] = {};  // kSplitSigns: the negated weights' dot
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          const int h = t * Tl::kScalesPerSub / 4;  // 16-weight scales: groups 0, 1 | 2, 3
          if constexpr (kSplitSigns) {
            GridGroup q;
            if constexpr (kReadWords)
              q = LaneReadsOf<Traits>::grid_i8_from(words, t, cb);
            else
              q = grid_i8_in_sub_block<Traits, kShape.whole_sub>(b, 4 * sub + t, cb);
            [[maybe_unused]] uint2 masks;
            if constexpr (kSignTable)
              SignMaskTable<kGridEntryBytes, kGridCopiesHere>::masks_at(
                  sign_copy, LaneReadsOf<Traits>::sign_code_from(words, t), masks.x, masks.y);
#pragma unroll
            for (int i = 0; i < 2; ++i) {
              uint32_t mask;
              if constexpr (kSignTable)
                mask = i ? masks.y : masks.x;
              else
                mask = sign_byte_mask4(i ? q.signs >> 4 : q.signs & 0xFu);
              sum[0][h] = dp4a(q.mag[i], x[0][2 * t + i], sum[0][h]);
              negated[h] = dp4a(q.mag[i] & mask, x[0][2 * t + i], negated[h]);
            }
          } else if constexpr (kAddends) {
            Int8Addends q;
            if constexpr (kReadWords)
              q = LaneReadsOf<Traits>::decode_i8_addends_from(words, t, cb);
            else if constexpr (kWideAddends)
              q = LaneReadsOf<Traits>::decode_i8_addends_whole_sub(b, 4 * sub + t, cb);
            else
              q = LaneReadsOf<Traits>::decode_i8_addends(b, 4 * sub + t, cb);
            sum[0][h] =
                dp4a(q.b[1], x[0][2 * t + 1],
                     dp4a(q.a[1], x[0][2 * t + 1], dp4a(q.b[0], x[0][2 * t], dp4a(q.a[0], x[0][2 * t], sum[0][h]))));
          } else {
            if (t % 2 == 0) load_half(t);
            Int8Group q;
            if constexpr (kReadWords)
              q = decode_i8_from_words<Traits>(words, t, cb);
            else
              q = decode_i8_in_sub_block<Traits, kShape.whole_sub>(b, 4 * sub + t, cb);
#pragma unroll
            for (int m = 0; m < kTokens; ++m) {
              const uint2 xm = x_group(m, t);
              sum[m][h] = dp4a(q.q[1], xm.y, dp4a(q.q[0], xm.x, sum[m][h]));
            }
          }
        }
#pragma unroll
        for (int h = 0; h < Tl::kScalesPerSub; ++h) {
          if constexpr (kSplitSigns) sum[0][h] -= 2 * negated[h];
          float ws;
          if constexpr (kReadWords)
            ws = LaneReadsOf<Traits>::scale_i8_from(words, h);
          else
            ws = Traits::scale_i8(b, Tl::kScalesPerSub * sub + h);
#pragma unroll
          for (int m = 0; m < kTokens; ++m)
            acc[r * kTokens + m] = fmaf(static_cast<float>(sum[m][h]), ws * x_scale[m], acc[r * kTokens + m]);
        }
      }
    };
    auto advance = [&](int rounds) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        w[r] += rounds * kStep;
        if constexpr (Traits::kSplitScales) split_scale[r] += rounds * kTeamThreads;
      }
      lo += rounds * 32 * kTeamThreads;
      hi += rounds * 32 * kTeamThreads;
    };
    // The lines of this thread's sub-block kAhead rounds past sub-block `from` start into L2
    // (LaneShape.prefetch_ahead), where that sub-block exists: no hint past the row.
    auto prefetch_ahead = [&](int from) {
      if (kAhead > 0 && from + kAhead * kTeamThreads < subs)
#pragma unroll
        for (int r = 0; r < kRows; ++r) prefetch_l2(w[r] + kAhead * kStep + sub_byte - anchor);
    };
    int j = tid;
    if constexpr (kPairs) {
      if (!item.live) j = subs;  // no local expert: no weight read, the outputs are zeros
    }
    if constexpr (kStaged) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      // stage unit u in stage `stage` (started a unit ago); the unit after it (this item's next,
      // or the team's next item's first) starts into the other stage before the decode
      constexpr int kRounds = Tl::kStageRounds;
      const int units = (subs + kRounds * kTeamThreads - 1) / (kRounds * kTeamThreads);
#pragma unroll 1
      for (int u = 0; u < units; ++u) {
        if (u + 1 < units)
          stage_round(item, u + 1, stage ^ 1);
        else if (group + group_step < groups)
          stage_round(item_of(lane_next_item(a, cursor, static_cast<uint32_t>(group_step), per_pair, first_x_row)), 0,
                      stage ^ 1);
        if (item.live) {
          mbarrier_wait_parity(stage_bars + stage, (phases >> stage) & 1u);
          phases ^= 1u << stage;
#pragma unroll
          for (int q = 0; q < kRounds; ++q) {
            const int j_round = tid + (u * kRounds + q) * kTeamThreads;
            if (j_round < subs) {
#pragma unroll
              for (int r = 0; r < kRows; ++r)
                w[r] = stage_ring + (stage * kBoxes + r / kBoxRows) * kSlot + r % kBoxRows * kUnit + q * kStep +
                       thread_byte + anchor;
              add_sub_block(j_round, 0);
              lo += 32 * kTeamThreads;
              hi += 32 * kTeamThreads;
            }
          }
        }
        __syncwarp();  // every lane done with this stage before the next copies into it start
        stage ^= 1;
      }
#endif
      j = subs;
    }
    if constexpr (kShape.pairs) {
#pragma unroll 1
      for (; j + kTeamThreads < subs; j += 2 * kTeamThreads) {
        prefetch_ahead(j);
        add_sub_block(j, 0);
        add_sub_block(j + kTeamThreads, 1);
        advance(2);
      }
    }
#pragma unroll 1
    for (; j < subs; j += kTeamThreads) {
      // the lines kAhead rounds on start into L2 (LaneShape.prefetch_ahead; with select_prefetch,
      // the next round's, or past the row's end this round's, a select in place of the branch)
      if constexpr (!kShape.select_prefetch) {
        prefetch_ahead(j);
      } else {
        const int64_t ahead = j + kTeamThreads < subs ? kStep : 0;
#pragma unroll
        for (int r = 0; r < kRows; ++r) prefetch_l2(w[r] + ahead + sub_byte - anchor);
      }
      add_sub_block(j, 0);
      advance(1);
    }

    int index;
    const float s = warp_sum_spread(acc, lane, index);
    float total = s;
    bool store = lane < kSums;  // lanes >= kSums repeat these sums
    if constexpr (kTeamWarps > 1) {
      // partial sums alternate between two sets, so that one barrier per group orders this
      // group's writes after the reads of the group before
      float* const partial = partials + (team * 2 + parity) * kTeamWarps * kSums;
      if (lane < kSums) partial[member * kSums + index] = s;
      // barrier `team` (0..15): barrier 0's use by the whole block at the start has completed
      named_barrier(team, kTeamThreads);
      store = member == 0 && lane < kSums;
      if (store) {
        total = 0.0f;
#pragma unroll
        for (int w2 = 0; w2 < kTeamWarps; ++w2) total += partial[w2 * kSums + index];
      }
    }
    if constexpr (kPairs) {
      const uint32_t pair = cursor.pair, g = cursor.group;
      cursor = lane_next_item(a, cursor, static_cast<uint32_t>(group_step), per_pair, first_x_row);
      if constexpr (kGated) {
        // act(gate) * up for outputs g * kSpan + i: gate row i's sum is value i, its up row's value
        // i + kSpan, the top bit of kSums values, which warp_sum_spread's first step puts in the
        // lane next door (lane bit 0)
        constexpr int kSpan = lane_item_span(true, kRows);
        const float up = __shfl_xor_sync(0xFFFFFFFFu, total, 1);
        const int64_t out = static_cast<int64_t>(g) * kSpan + index;
        if (store && index < kSpan && out < a.n / 2)
          static_cast<__nv_bfloat16*>(a.y)[static_cast<int64_t>(pair) * a.y_row_stride + out] =
              __float2bfloat16_rn(moe_activate(a.pairs.activation, total) * up);
      } else {
        const int64_t row = static_cast<int64_t>(g) * kRows + index;
        if (store && row < a.n)
          store_float_as(a.y, a.pairs.out_type, static_cast<int64_t>(pair) * a.y_row_stride + row, total);
      }
    } else {
      const int64_t row = group * kRows + index / kTokens;
      // (the kernel of four tokens serves M = 3 too; below that kTokens == M)
      if (store && row < a.n && (kTokens <= 2 || index % kTokens < a.m))
        static_cast<Act*>(a.y)[(index % kTokens) * a.y_row_stride + row] = from_float<Act>(total);
    }
  }
}

template <class Traits, class Act, int kTokens, bool kWords = false>
__global__ void __launch_bounds__(32 * kLaneBlockWarps, 1) mmvq_lane_kernel(MmvqArgs a) {
  lane_kernel_body<Traits, Act, kTokens, kWords, MmvqMode::kDense, false, false>(a, nullptr);
}

// The pairs modes (kMode kPairs or kGatedPairs): unstaged, and with the staged rounds, whose tensor
// map is a parameter of its own (inside MmvqPairArgs its 64-byte alignment cost an unstaged
// instance a spill) and of theirs only.
template <class Traits, MmvqMode kMode, bool kWords, bool kFewPairs>
__global__ void __launch_bounds__(32 * kLaneBlockWarps, 1) mmvq_lane_pairs_kernel(MmvqPairArgs a) {
  lane_kernel_body<Traits, __nv_bfloat16, 1, kWords, kMode, kFewPairs, false>(a, nullptr);
}
template <class Traits, MmvqMode kMode, bool kFewPairs>
__global__ void __launch_bounds__(32 * kLaneBlockWarps, 1)
    mmvq_lane_staged_kernel(MmvqPairArgs a, const __grid_constant__ CUtensorMap w_map) {
  lane_kernel_body<Traits, __nv_bfloat16, 1, false, kMode, kFewPairs, true>(a, &w_map);
}

}  // namespace lowbit::cuda_detail
