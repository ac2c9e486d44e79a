// The grouped mode of MMQ: the batched MoE projection on the Hopper mainloop (mmq_kernel.cuh).
//
// The scheduler is the only difference from the dense GEMM. Block (x, y) takes routing block x
// (kTokens sorted rows of one expert, moe_align with block_size = kTokens) and row tile y of that
// expert's weight; blocks past num_padded or of no local expert exit before any work. The token
// tile gathers its rows of the permuted activations through sorted_pairs (pair -> its row of x,
// pair / x_pair_divisor; padding and dropped pairs read zeros), and the epilogue scatters each
// result to its pair's output row. Weight decode, staging, wgmma and roundings are the dense
// kernel's, so the dense MMQ's exact-rounding emulation bounds it too.
//
// Gated (w13: gate rows [0, n), up rows [n, 2n)): a warp's 16 rows are 8 gate rows and their 8 up
// rows (TileRows), so accumulator i (row g) and i + 2 (row g + 8) of a lane are the
// gate and up sums of one output and one token: the epilogue writes bf16 act(gate) * up without
// leaving registers. A block then covers 64 outputs.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "cuda/common/store_float.cuh"
#include "cuda/mmq/mmq_grouped_launch.h"
#include "cuda/mmq/mmq_kernel.cuh"
#include "cuda/moe/moe_launch.h"

namespace lowbit::cuda_detail {

template <class Traits, int kTokens, bool kGated, bool kInt8, bool kExactSpans>
struct MmqGroupedTiling {
  using Tl = MmqTiling<Traits, kTokens, kInt8, true, kExactSpans>;
  // After the dense kernel's codebook and ring: each tile row's x row and pair (int32, -1: zeros)
  static constexpr int kTableOffset = Tl::kSmemBytes - 1024;  // from the 1024-aligned base
  static constexpr int kTableBytes = Tl::kRowTableBytes;
  static constexpr int kSmemBytes = Tl::kSmemBytes + kTableBytes;
  static_assert(kSmemBytes <= (Tl::kTwoBlocks ? 113 : 227) * 1024, "the row tables fit beside the dense ring");
  static constexpr int kOutputsPerBlock = kGated ? Tl::kRows / 2 : Tl::kRows;
  // The epilogue's tile of results, [kTokens][kTileStride] floats over the ring (free after the
  // mainloop): 4 floats of padding put a warp's 32 stores of one accumulator in 32 banks.
  static constexpr int kTileStride = kOutputsPerBlock + 4;
  static_assert(kTokens * kTileStride * 4 <= Tl::kStages * Tl::kStageBytes, "the result tile fits the ring");
  static constexpr int kVectorsPerRow = kOutputsPerBlock / 4;  // four outputs per thread and store
};

template <class Traits, int kTokens, bool kGated, bool kInt8, bool kExactSpans>
__global__ void __launch_bounds__(MmqTiling<Traits, kTokens, kInt8, true, kExactSpans>::kThreads,
                                  MmqTiling<Traits, kTokens, kInt8, true, kExactSpans>::kBlocksPerSm)
    mmq_grouped_kernel(MoeProjArgs a, const uint8_t* xp, int64_t k_pad) {
  using Gt = MmqGroupedTiling<Traits, kTokens, kGated, kInt8, kExactSpans>;
  pdl_wait_for_primary();  // as in mmq_wgmma_kernel: the routing and the prologue are read below
  pdl_launch_dependents();
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kTokens;
  if (first >= a.num_padded[0] || first >= a.sorted_capacity) return;  // experts with no pair cost nothing
  const int32_t e = a.block_experts[blockIdx.x];
  if (e < 0 || e >= a.experts) return;

  extern __shared__ uint8_t smem_raw[];
  uint8_t* const smem = aligned_mmq_smem(smem_raw);
  int32_t* const x_rows = reinterpret_cast<int32_t*>(smem + Gt::kTableOffset);
  int32_t* const pair_of = x_rows + kTokens;
  if (threadIdx.x < kTokens) {
    const int64_t slot = first + threadIdx.x;
    const int64_t pair = slot < a.sorted_capacity ? a.sorted_pairs[slot] : int64_t{-1};
    const bool valid = pair >= 0 && pair < a.pairs;
    pair_of[threadIdx.x] = valid ? static_cast<int32_t>(pair) : -1;
    x_rows[threadIdx.x] = valid ? static_cast<int32_t>(pair / a.x_pair_divisor) : -1;
  }
  __syncthreads();  // the first stage reads x_rows

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  MmqTileSource src{};
  src.w.w = a.w + e * a.w_expert_stride;
  src.w.w_row_stride = a.w_row_stride;
  src.w.scales = a.scales != nullptr ? a.scales + e * a.scale_expert_stride : nullptr;
  src.w.scale_row_stride = a.scale_row_stride;
  src.w.n = kGated ? 2 * a.n : a.n;
  src.w.k = a.k;
  // gated: output j's gate row is j and its up row n + j; a warp takes 8 outputs
  const int64_t out0 = static_cast<int64_t>(blockIdx.y) * Gt::kOutputsPerBlock + (kGated ? 8 : 16) * warp;
  src.rows = kGated ? TileRows{out0, a.n + out0, a.n, 2 * a.n} : TileRows::dense(out0, a.n);
  const auto act_row = [&](int r) -> int64_t { return x_rows[r]; };
  float acc[kTokens / 2];
  mmq_mainloop<Traits, kTokens, kGated, kInt8, true, kExactSpans>(src, act_row, xp, k_pad, 0,
                                                                  static_cast<int>(k_pad / kMmqUnitElems), smem, acc);

  // The results leave through shared memory: each thread's accumulators land in the tile (token
  // column, output), then a warp writes whole runs of a pair's outputs, four per lane in one
  // store. In the accumulators' own layout each store instruction wrote 2-4 bytes to four pairs'
  // rows: a large share of the kernel at 512 tokens (benchmarks/NOTES.md). Storing every
  // accumulator first, with no branch on the pairs, also keeps ptxas from serializing the wgmma
  // (C7515: the pairs read from shared memory and tested before the stores did, 15e5390).
  __syncthreads();  // every warp's wgmma has read the ring
  float* const tile = reinterpret_cast<float*>(smem + Gt::Tl::kCodebookBytes);
#pragma unroll
  for (int i = 0; i < kTokens / 2; ++i) {
    const int c = 8 * (i >> 2) + 2 * t + (i & 1);  // accumulator i's token column
    if constexpr (kGated) {
      if (i & 2) continue;  // the up sum of accumulator i - 2
      tile[c * Gt::kTileStride + 8 * warp + g] = moe_activate(a.activation, acc[i]) * acc[i + 2];
    } else {
      tile[c * Gt::kTileStride + 16 * warp + g + 8 * ((i >> 1) & 1)] = acc[i];
    }
  }
  __syncthreads();
  const int64_t nb = static_cast<int64_t>(blockIdx.y) * Gt::kOutputsPerBlock;
  const FloatType type = kGated ? FloatType::BF16 : a.out_type;
  const uintptr_t vector_bytes = (type == FloatType::F32 ? 4 : 2) * 4;
  // one vector store per lane where the block's outputs all exist and every row keeps its alignment
  const bool vectors = nb + Gt::kOutputsPerBlock <= a.n && reinterpret_cast<uintptr_t>(a.out) % vector_bytes == 0 &&
                       a.out_row_stride % 4 == 0;
  // consecutive threads store consecutive runs of four outputs of one pair's row: a warp one or
  // more whole rows, or (a row of more than 32 runs) warps w and w + 1 one row
  constexpr int kRun = Gt::kVectorsPerRow;
  constexpr int kRowsPerPass = Gt::Tl::kThreads / kRun;
  static_assert(kRun % 32 == 0 || 32 % kRun == 0, "a warp writes whole rows, or whole warps a row");
  const int q = kRun <= 32 ? lane % kRun : (warp % (kRun / 32)) * 32 + lane;
  for (int c = kRun <= 32 ? warp * (32 / kRun) + lane / kRun : warp / (kRun / 32); c < kTokens; c += kRowsPerPass) {
    const int32_t pair = pair_of[c];
    if (pair < 0) continue;  // padding, or a pair the routing dropped
    const float4 v = reinterpret_cast<const float4*>(tile + c * Gt::kTileStride)[q];
    const int64_t j = nb + 4 * q, at = pair * a.out_row_stride + j;
    if (vectors) {
      store_float4_as(a.out, type, at, v);
    } else {
      const float vs[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (j + e < a.n) store_float_as(a.out, type, at + e, vs[e]);
    }
  }
}

template <class Traits, int kTokens, bool kGated, bool kInt8, bool kExactSpans>
void launch_grouped_tiles(const MoeProjArgs& a, const uint8_t* xp, int64_t k_pad, cudaStream_t stream) {
  using Gt = MmqGroupedTiling<Traits, kTokens, kGated, kInt8, kExactSpans>;
  auto* kernel = &mmq_grouped_kernel<Traits, kTokens, kGated, kInt8, kExactSpans>;
  configure_shared_memory(reinterpret_cast<const void*>(kernel), Gt::kSmemBytes, "moe_batched");
  const dim3 grid(static_cast<unsigned>((a.sorted_capacity + kTokens - 1) / kTokens),
                  static_cast<unsigned>((a.n + Gt::kOutputsPerBlock - 1) / Gt::kOutputsPerBlock));
  launch_programmatic<&mmq_grouped_kernel<Traits, kTokens, kGated, kInt8, kExactSpans>>(
      grid, Gt::Tl::kThreads, Gt::kSmemBytes, stream, "moe_batched (grouped mmq)", a, xp, k_pad);
}

// The wide tile (MmqTiling::kWide) of IQ4_NL with exact row spans (a third stage) where the
// weight's alignment allows them, else with MmqRows' (for IQ4_XS they are the same).
template <class Traits, int kTokens, bool kInt8>
void launch_grouped(const MoeProjArgs& a, const uint8_t* xp, int64_t k_pad, cudaStream_t stream) {
  const auto tiles = [&](auto exact) {
    if (a.gated)
      launch_grouped_tiles<Traits, kTokens, true, kInt8, exact()>(a, xp, k_pad, stream);
    else
      launch_grouped_tiles<Traits, kTokens, false, kInt8, exact()>(a, xp, k_pad, stream);
  };
  if constexpr (MmqTiling<Traits, kTokens, kInt8, true>::kWide && kMmqExactRowsShorter<Traits>) {
    if (mmq_exact_spans_fit<Traits>(a.w, a.w_row_stride, a.w_expert_stride)) return tiles(std::true_type{});
  }
  tiles(std::false_type{});
}

// The prologue (bf16 in MMQ's K order, or int8 units where a.batched_int8) of the x rows the
// pairs read, then the grouped tiles.
template <QuantType T>
void launch_moe_grouped_mmq(const MoeProjArgs& a, uint8_t* workspace, cudaStream_t stream) {
  using Traits = FormatTraits<T>;
  if (a.pairs == 0 || a.n == 0 || a.sorted_capacity == 0) return;
  const int64_t k_pad = (a.k + kMmqUnitElems - 1) / kMmqUnitElems * kMmqUnitElems;
  MmqArgs prologue{};
  prologue.x = a.x;
  prologue.x_row_stride = a.x_row_stride;
  prologue.x_type = FloatType::BF16;
  prologue.m = (a.pairs + a.x_pair_divisor - 1) / a.x_pair_divisor;
  prologue.k = a.k;
  prologue.workspace = workspace;
  prologue.zero_slots = a.zero_slots;  // the dropped pairs' zeros (moe_batched with pair slots)
  prologue.zero_pairs = a.pairs;
  prologue.zero_divisor = a.x_pair_divisor;
  prologue.y = a.out;
  prologue.y_type = out_float_type(a);
  prologue.y_row_stride = a.out_row_stride;
  prologue.n = a.n;
  bool launched = false;
  if (a.batched_int8) {
    launched = visit_int8_token_tile<Traits>(a.block_size, [&](auto tile) {
      launch_mmq_quantize<Traits>(prologue, k_pad, stream);
      launch_grouped<Traits, tile(), true>(a, workspace, k_pad, stream);
    });
  } else {
    launch_mmq_permute<Traits>(prologue, k_pad, stream);
    launched = visit_grouped_token_tile(
        a.block_size, [&](auto tile) { launch_grouped<Traits, tile(), false>(a, workspace, k_pad, stream); });
  }
  if (!launched)
    detail::fail("moe_batched: the grouped MMQ kernel has no ", a.batched_int8 ? "int8 " : "", "token tile of ",
                 a.block_size, " rows for ", Traits::kName);
}

}  // namespace lowbit::cuda_detail
