// The int8 MMVQ's pairs mode (MmvqPairs in mmvq_args.h, the MoE vector projection): where a block
// of a launch over routed pairs finds its pair, expert, rows and activations, and the gated
// epilogue act(gate) * up that a tile of 8 gate rows and their 8 up rows allows in one lane.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/common/activation.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/mmvq/mmvq_args.h"
#include "cuda/mmvq/row_pipeline.cuh"

namespace lowbit::cuda_detail {

// Outputs of one pairs-mode tile: 16 rows, or 8 gated outputs (their 8 gate and 8 up rows).
__host__ __device__ inline int64_t pair_tile_outputs(bool gated) {
  return gated ? 8 : 16;
}
// Outputs per pair: N, or n' = N / 2 when gated.
__host__ __device__ inline int64_t pair_outputs(const MmvqArgs& a, bool gated) {
  return gated ? a.n / 2 : a.n;
}
__host__ __device__ inline int64_t pair_tiles(const MmvqArgs& a, bool gated) {
  const int64_t per_tile = pair_tile_outputs(gated);
  return (pair_outputs(a, gated) + per_tile - 1) / per_tile;
}

// Block blockIdx.x = pair * tiles + tile. The grid has at most 2^31 - 1 blocks (checked on the
// host), so 32-bit divisions serve (a 64-bit one is a call that holds registers across it).
template <bool kGated>
__device__ __forceinline__ uint32_t block_pair(const MmvqArgs& a) {
  return blockIdx.x / static_cast<uint32_t>(pair_tiles(a, kGated));
}

// Points a.y at the block's pair's output row (bf16 when gated, else in a.pairs.out_type).
template <bool kGated>
__device__ __forceinline__ void point_at_pair_output(MmvqPairArgs& a) {
  const int64_t bytes = kGated || a.pairs.out_type != FloatType::F32 ? 2 : 4;
  a.y = static_cast<uint8_t*>(a.y) + static_cast<int64_t>(block_pair<kGated>(a)) * a.y_row_stride * bytes;
}

// Sets the block's tile rows, rebases `a` to its pair's expert (weights, split scales) as a
// one-token problem (m = 1) and gives the pair's activation row (its token). A pair without a
// local expert writes its tile's outputs as zeros, reads no weight and returns false. The output
// row is pointed at only at the end (point_at_pair_output): a pointer less to hold in the loop.
// (The gated form is a template argument: its row map then derives from N alone, and the
// instances stay within their registers.)
template <bool kGated>
__device__ __forceinline__ bool enter_pair(MmvqPairArgs& a, TileRows& rows, int& x_row) {
  const uint32_t pair = block_pair<kGated>(a);
  const int64_t j0 = static_cast<int64_t>(blockIdx.x - pair * static_cast<uint32_t>(pair_tiles(a, kGated))) *
                     pair_tile_outputs(kGated);
  if constexpr (kGated)
    rows = TileRows{j0, a.n / 2 + j0, a.n / 2, a.n};
  else
    rows = TileRows::dense(j0, a.n);
  const int32_t e = a.pairs.experts.of(pair);
  if (e < 0) {
    // The zeros go to the output, which the kernel before may still touch, and a block must not
    // exit before its wait (launch.h): a grid of non-local pairs alone would end before its primary.
    pdl_wait_for_primary();
    point_at_pair_output<kGated>(a);
    const int r = static_cast<int>(threadIdx.x);
    if constexpr (kGated) {
      if (r < 8 && rows.exists(r)) static_cast<__nv_bfloat16*>(a.y)[rows.row(r)] = __float2bfloat16_rn(0.0f);
    } else {
      if (r < 16 && rows.exists(r)) store_float_as(a.y, a.pairs.out_type, rows.row(r), 0.0f);
    }
    return false;
  }
  a.w += e * a.pairs.w_expert_stride;
  if (a.scales != nullptr) a.scales += e * a.pairs.scale_expert_stride;
  const int64_t divisor = a.pairs.x_pair_divisor;
  x_row = divisor > pair ? 0 : static_cast<int>(pair / static_cast<uint32_t>(divisor));
  a.m = 1;
  return true;
}

// reduce_and_store for a gated tile of one token: the warps' sums of gate row g (C element 0 of
// lane 4g) and up row g (element 2) in a fixed order, then bf16 act(gate) * up for output lo + g.
__device__ __forceinline__ void reduce_and_store_gated(const MmvqPairArgs& a, float* partial, const float (&acc)[1][4],
                                                       const TileRows& rows, int warp, int lane) {
  const int warps = static_cast<int>(blockDim.x >> 5);
#pragma unroll
  for (int c = 0; c < 4; ++c) partial[(warp * 4 + c) * 32 + lane] = acc[0][c];
  __syncthreads();
  const int g = static_cast<int>(threadIdx.x);
  if (g >= 8 || !rows.exists(g)) return;
  float gate = 0.0f, up = 0.0f;
  for (int w = 0; w < warps; ++w) {
    gate += partial[(w * 4 + 0) * 32 + 4 * g];
    up += partial[(w * 4 + 2) * 32 + 4 * g];
  }
  static_cast<__nv_bfloat16*>(a.y)[rows.row(g)] = __float2bfloat16_rn(moe_activate(a.pairs.activation, gate) * up);
}

}  // namespace lowbit::cuda_detail
