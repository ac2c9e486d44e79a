// The MoE vector projection (few tokens). Weight types with an int8 form run the dp4a lane MMVQ in
// its pairs mode (mmvq/lane_pairs.cuh: one kernel that reads the router's ids and quantizes its
// pairs' activations to int8 per 32 values in each block), and where a pair's activation row does
// not fit the lane kernel's shared memory the int8 tensor-core MMVQ's pairs mode (mmvq_pairs.cuh,
// after its quantizing prologue). The others (MXFP8) run the float32 kernel here: one block per
// (pair, tile of outputs); each warp takes two weight rows of the pair's expert (two outputs, or
// the gate and up rows of one gated output), its lanes stride over the row's groups of eight
// weights, decode them exactly and multiply with the pair's bf16 activations in float32; a warp
// reduction gives each dot product.
#pragma once

#include <cuda_bf16.h>

#include "cuda/common/device_codebooks.cuh"
#include "cuda/common/launch.h"
#include "cuda/mmvq/mmvq_launch.cuh"
#include "cuda/moe/moe_launch.h"
#include "cuda/moe/moe_weight_rows.cuh"

namespace lowbit::cuda_detail {

inline constexpr int kMoeVecThreads = 32 * kMoeVecWarps;

__host__ __device__ inline int64_t moe_vec_outputs_per_block(bool gated) {
  return gated ? kMoeVecWarps : kMoeVecWarps * kMoeVecRowsPerWarp;
}

// blockIdx.x = pair * tiles + tile (x: up to 2^31 - 1 blocks, checked on the host).
template <class Traits>
__global__ void __launch_bounds__(kMoeVecThreads) moe_vec_kernel(MoeProjArgs a) {
  const int64_t per_block = moe_vec_outputs_per_block(a.gated);
  const int64_t tiles = (a.n + per_block - 1) / per_block;
  const int64_t pair = static_cast<int64_t>(blockIdx.x) / tiles;
  const int64_t tile = static_cast<int64_t>(blockIdx.x) - pair * tiles;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t e = a.pair_experts.of(pair);
  // output j of this warp, and the two rows it reads
  int64_t out_j[kMoeVecRowsPerWarp];
  int64_t rows[kMoeVecRowsPerWarp];
  bool valid[kMoeVecRowsPerWarp];
  if (a.gated) {
    const int64_t j = tile * per_block + warp;
    out_j[0] = out_j[1] = j;
    rows[0] = j;
    rows[1] = a.n + j;
    valid[0] = valid[1] = j < a.n;
  } else {
#pragma unroll
    for (int r = 0; r < kMoeVecRowsPerWarp; ++r) {
      out_j[r] = tile * per_block + warp * kMoeVecRowsPerWarp + r;
      rows[r] = out_j[r];
      valid[r] = out_j[r] < a.n;
    }
  }
  float acc[kMoeVecRowsPerWarp] = {};
  if (e >= 0) {
    const Codebooks cb = global_codebooks<Traits::kCodebook>();
    const uint16_t* x = a.x + (pair / a.x_pair_divisor) * a.x_row_stride;
    MoeWeightRow w[kMoeVecRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kMoeVecRowsPerWarp; ++r) w[r] = moe_weight_row(a, e, valid[r] ? rows[r] : 0);
    const int64_t groups = a.k / kGroupElems;
    for (int64_t g = lane; g < groups; g += 32) {
      float xv[8];
      bf16x8_to_float(*reinterpret_cast<const uint4*>(x + g * kGroupElems), xv);
#pragma unroll
      for (int r = 0; r < kMoeVecRowsPerWarp; ++r) {
        if (!valid[r]) continue;
        float wv[8];
        moe_decode_group<Traits>(w[r], g, cb, wv);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[r] = fmaf(wv[i], xv[i], acc[r]);
      }
    }
#pragma unroll
    for (int r = 0; r < kMoeVecRowsPerWarp; ++r)
#pragma unroll
      for (int off = 16; off > 0; off /= 2) acc[r] += __shfl_xor_sync(0xFFFFFFFFu, acc[r], off);
  }
  if (lane != 0) return;
  if (a.gated) {
    if (!valid[0]) return;
    const float v = moe_activate(a.activation, acc[0]) * acc[1];
    const __nv_bfloat16 b = __float2bfloat16_rn(v);
    static_cast<uint16_t*>(a.out)[pair * a.out_row_stride + out_j[0]] = *reinterpret_cast<const uint16_t*>(&b);
  } else {
#pragma unroll
    for (int r = 0; r < kMoeVecRowsPerWarp; ++r)
      if (valid[r]) store_float_as(a.out, a.out_type, pair * a.out_row_stride + out_j[r], acc[r]);
  }
}

// The projection as a pairs mode of the int8 MMVQs: the dp4a lane kernel's where one activation
// row fits a block's shared memory, else the tensor-core kernel's (a.int8_activations holds its
// prologue's output).
template <class Traits>
void launch_moe_vec_int8(const MoeProjArgs& a, cudaStream_t stream) {
  const int64_t rows = (a.pairs + a.x_pair_divisor - 1) / a.x_pair_divisor;
  MmvqPairArgs m{};
  m.w = a.w;
  m.w_row_stride = a.w_row_stride;
  m.scales = a.scales;
  m.scale_row_stride = a.scale_row_stride;
  m.n = a.gated ? 2 * a.n : a.n;
  m.k = a.k;
  m.x = a.x;
  m.x_row_stride = a.x_row_stride;
  m.m = static_cast<int>(rows);
  m.y = a.out;
  m.y_row_stride = a.out_row_stride;
  m.xs = reinterpret_cast<const float*>(a.int8_activations);
  m.xq = a.int8_activations + int8_scale_bytes(rows, a.k);
  m.pairs.experts = a.pair_experts;
  m.pairs.count = a.pairs;
  m.pairs.expert_count = a.experts;
  m.pairs.w_expert_stride = a.w_expert_stride;
  m.pairs.scale_expert_stride = a.scale_expert_stride;
  m.pairs.x_pair_divisor = lane_pair_divisor(a.x_pair_divisor, a.pairs);  // the kernels divide in 32 bits
  m.pairs.out_type = a.out_type;
  m.pairs.gated = a.gated;
  m.pairs.activation = a.activation;
  if (launch_mmvq_lane_pairs<Traits>(m, stream)) return;
  launch_mmvq_int8_pairs<Traits>(m, stream);
}

template <QuantType T>
void launch_moe_vec(const MoeProjArgs& a, cudaStream_t stream) {
  if (a.pairs == 0 || a.n == 0) return;
  if constexpr (HasInt8<FormatTraits<T>>::value) {
    launch_moe_vec_int8<FormatTraits<T>>(a, stream);
  } else {
    const int64_t per_block = moe_vec_outputs_per_block(a.gated);
    const int64_t blocks = a.pairs * ((a.n + per_block - 1) / per_block);
    moe_vec_kernel<FormatTraits<T>><<<static_cast<unsigned>(blocks), kMoeVecThreads, 0, stream>>>(a);
    check_launch("moe_vec");
  }
}

}  // namespace lowbit::cuda_detail
