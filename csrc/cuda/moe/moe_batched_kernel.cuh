// The MoE batched kernel (many tokens) where the Hopper grouped MMQ does not run (sm_80/89/120, or
// a routing block size MMQ has no tile for): a grouped GEMM over the routing. Block (b, t) takes
// kMoeTileM sorted rows of a routing block (all pairs of one expert, padded with the sentinel; a
// routing block of more rows takes several blocks, of fewer leaves the rest of the tile empty) and
// tile t of the expert's weight rows; per kMoeTileK slice of K it gathers the pairs' bf16
// activation rows into shared memory, decodes the weight tile there as bf16 with the format's
// own primitive, and multiplies on the tensor cores (Bf16TileMma). The epilogue writes each pair's
// row of the output (plain float32, or bf16 act(gate) * up where the tile holds the gate and up
// rows of the same outputs). Nothing outside the tile is ever decoded to bf16.
// The next slice is loaded and decoded into registers while the tensor cores take the current
// one. Its weights are the float decode rounded to bf16 once (render_bf16 of the dense kernels
// rounds the scale first), so its bf16 values may differ from MMQ's in the last bit.
#pragma once

#include <cuda_bf16.h>

#include "cuda/common/device_codebooks.cuh"
#include "cuda/common/launch.h"
#include "cuda/common/store_float.cuh"
#include "cuda/moe/bf16_tile_mma.cuh"
#include "cuda/moe/moe_launch.h"
#include "cuda/moe/moe_weight_rows.cuh"

namespace lowbit::cuda_detail {

using MoeTileMma = Bf16TileMma<kMoeTileM, kMoeTileN, kMoeTileK, 2, 2>;
inline constexpr int kMoeBatchedThreads = MoeTileMma::kThreads;
inline constexpr int kMoeGroupsPerRow = kMoeTileK / kGroupElems;  // groups of one tile row per K slice
// Rows of A (and of B) each thread fills per K slice
inline constexpr int kMoeRowsPerThread = kMoeTileM * kMoeGroupsPerRow / kMoeBatchedThreads;
inline constexpr int kMoeRowStep = kMoeBatchedThreads / kMoeGroupsPerRow;
inline constexpr int kMoeSharedBytes = MoeTileMma::kABytes + MoeTileMma::kBBytes;
static_assert(kMoeTileM == kMoeTileN, "one row map fills A and B");
static_assert(MoeTileMma::kCBytes <= kMoeSharedBytes, "the C tile reuses the A and B buffers");
static_assert(kMoeRowsPerThread * kMoeRowStep == kMoeTileM, "threads cover the tile");

// Outputs one tile covers: gated tiles hold kMoeTileN / 2 gate rows and the matching up rows.
__host__ __device__ inline int64_t moe_batched_outputs_per_tile(bool gated) {
  return gated ? kMoeTileN / 2 : kMoeTileN;
}

template <class Traits>
__global__ void __launch_bounds__(kMoeBatchedThreads) moe_batched_kernel(MoeProjArgs a) {
  const int tiles_per_block = moe_batched_tiles_per_block(a.block_size);
  const int64_t block = blockIdx.x / tiles_per_block;
  const int row_begin = static_cast<int>(blockIdx.x % tiles_per_block) * kMoeTileM;  // in the routing block
  const int rows_here = a.block_size - row_begin < kMoeTileM ? a.block_size - row_begin : kMoeTileM;
  const int64_t first_row = block * a.block_size + row_begin;
  const int64_t used = a.num_padded[0];
  if (first_row >= used || first_row >= a.sorted_capacity) return;  // experts with no pair cost nothing
  const int32_t e = a.block_experts[block];
  if (e < 0 || e >= a.experts) return;

  __shared__ __align__(16) uint8_t shared[kMoeSharedBytes];
  uint32_t* a_words = reinterpret_cast<uint32_t*>(shared);
  uint32_t* b_words = reinterpret_cast<uint32_t*>(shared + MoeTileMma::kABytes);

  const int col_group = threadIdx.x % kMoeGroupsPerRow;  // this thread's group within a K slice
  const int row0 = threadIdx.x / kMoeGroupsPerRow;       // its rows: row0 + kMoeRowStep * i
  const int64_t per_tile = moe_batched_outputs_per_tile(a.gated);
  const int64_t out0 = static_cast<int64_t>(blockIdx.y) * per_tile;

  // The gathered activation rows (null: a padding row, zeros) and the weight rows of this thread.
  const uint16_t* x_rows[kMoeRowsPerThread];
  MoeWeightRow w_rows[kMoeRowsPerThread];
  bool w_valid[kMoeRowsPerThread];
#pragma unroll
  for (int i = 0; i < kMoeRowsPerThread; ++i) {
    const int r = row0 + kMoeRowStep * i;
    const int64_t slot = first_row + r;
    const int64_t pair = slot < a.sorted_capacity && r < rows_here ? a.sorted_pairs[slot] : a.pairs;
    x_rows[i] = (pair >= 0 && pair < a.pairs) ? a.x + (pair / a.x_pair_divisor) * a.x_row_stride : nullptr;
    int64_t w_row, out_j;
    if (a.gated) {
      out_j = out0 + r % (kMoeTileN / 2);
      w_row = r < kMoeTileN / 2 ? out_j : a.n + out_j;
    } else {
      out_j = out0 + r;
      w_row = out_j;
    }
    w_valid[i] = out_j < a.n;
    w_rows[i] = moe_weight_row(a, e, w_valid[i] ? w_row : 0);
  }

  const Codebooks cb = global_codebooks<Traits::kCodebook>();
  MoeTileMma::Acc acc;
  MoeTileMma::zero(acc);
  // Slice k0's activations and decoded weights, fetched into registers one slice ahead so that
  // their global loads are in flight while the tensor cores take the slice before.
  uint4 x_next[kMoeRowsPerThread], w_next[kMoeRowsPerThread];
  auto fetch = [&](int64_t k0) {
    const int64_t kk = k0 + kGroupElems * col_group;
    const bool k_in = kk < a.k;  // K is whole 32-weight blocks: a last slice may be half full
#pragma unroll
    for (int i = 0; i < kMoeRowsPerThread; ++i) {
      x_next[i] = make_uint4(0, 0, 0, 0);
      if (k_in && x_rows[i] != nullptr) x_next[i] = *reinterpret_cast<const uint4*>(x_rows[i] + kk);
      w_next[i] = make_uint4(0, 0, 0, 0);
      if (k_in && w_valid[i]) {
        float v[8];
        moe_decode_group<Traits>(w_rows[i], kk / kGroupElems, cb, v);
        w_next[i] = make_uint4(pack_bf16_pair(v[0], v[1]), pack_bf16_pair(v[2], v[3]), pack_bf16_pair(v[4], v[5]),
                               pack_bf16_pair(v[6], v[7]));
      }
    }
  };
  fetch(0);
  for (int64_t k0 = 0; k0 < a.k; k0 += kMoeTileK) {
#pragma unroll
    for (int i = 0; i < kMoeRowsPerThread; ++i) {
      const int r = row0 + kMoeRowStep * i;
      *reinterpret_cast<uint4*>(a_words + r * MoeTileMma::kRowWords + 4 * col_group) = x_next[i];
      *reinterpret_cast<uint4*>(b_words + r * MoeTileMma::kRowWords + 4 * col_group) = w_next[i];
    }
    __syncthreads();
    if (k0 + kMoeTileK < a.k) fetch(k0 + kMoeTileK);
    MoeTileMma::multiply(a_words, b_words, acc);
    __syncthreads();
  }

  float* c = reinterpret_cast<float*>(shared);
  MoeTileMma::store(acc, c);
  __syncthreads();
  if (a.gated) {
    constexpr int kHalf = kMoeTileN / 2;
    for (int idx = threadIdx.x; idx < kMoeTileM * kHalf; idx += kMoeBatchedThreads) {
      const int r = idx / kHalf, col = idx % kHalf;
      const int64_t slot = first_row + r;
      const int64_t pair = slot < a.sorted_capacity && r < rows_here ? a.sorted_pairs[slot] : a.pairs;
      const int64_t j = out0 + col;
      if (pair < 0 || pair >= a.pairs || j >= a.n) continue;
      const float g = c[r * MoeTileMma::kCRowFloats + col], u = c[r * MoeTileMma::kCRowFloats + kHalf + col];
      const __nv_bfloat16 v = __float2bfloat16_rn(moe_activate(a.activation, g) * u);
      static_cast<uint16_t*>(a.out)[pair * a.out_row_stride + j] = *reinterpret_cast<const uint16_t*>(&v);
    }
  } else {
    for (int idx = threadIdx.x; idx < kMoeTileM * kMoeTileN; idx += kMoeBatchedThreads) {
      const int r = idx / kMoeTileN, col = idx % kMoeTileN;
      const int64_t slot = first_row + r;
      const int64_t pair = slot < a.sorted_capacity && r < rows_here ? a.sorted_pairs[slot] : a.pairs;
      const int64_t j = out0 + col;
      if (pair < 0 || pair >= a.pairs || j >= a.n) continue;
      store_float_as(a.out, a.out_type, pair * a.out_row_stride + j, c[r * MoeTileMma::kCRowFloats + col]);
    }
  }
}

template <QuantType T>
void launch_moe_batched(const MoeProjArgs& a, cudaStream_t stream) {
  if (a.pairs == 0 || a.n == 0 || a.sorted_capacity == 0) return;
  const int64_t blocks =
      (a.sorted_capacity + a.block_size - 1) / a.block_size * moe_batched_tiles_per_block(a.block_size);
  const int64_t per_tile = moe_batched_outputs_per_tile(a.gated);
  const int64_t tiles = (a.n + per_tile - 1) / per_tile;
  moe_batched_kernel<FormatTraits<T>>
      <<<dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(tiles)), kMoeBatchedThreads, 0, stream>>>(a);
  check_launch("moe_batched");
}

}  // namespace lowbit::cuda_detail
