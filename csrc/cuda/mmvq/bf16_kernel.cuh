// MMVQ: y = x W^T for up to 16 tokens in one pass over the quantized weight.
//
// A block owns 16 weight rows (one tensor-core tile) over the whole K; its 8 warps split K into
// 256-element units. Each warp streams its units' bytes for the 16 rows into a private ring of
// shared-memory stages with cp.async (16-byte copies of the aligned span around the unit, so the
// GGUF bytes stay unaligned and unchanged), decodes them with the format's decode primitive to
// bf16 pairs, and multiplies on tensor cores (mma m16n8k16, float32 accumulate) against the
// activations, read as bf16 from L1. K order inside a 32-weight sub-block is permuted so that a
// lane's eight decoded weights are exactly its A fragment: lane (g, t) decodes weights
// [8t, 8t + 8) of rows g and g + 8 and loads x[token g][8t, 8t + 8) as its B fragment. Warps'
// partial sums meet in shared memory at the end (deterministic order).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/common/device_codebooks.cuh"
#include "cuda/common/launch.h"
#include "cuda/common/ptx.cuh"
#include "cuda/common/render_bf16.cuh"
#include "cuda/mmvq/row_pipeline.cuh"
#include "lowbit/formats/all.h"

namespace lowbit::cuda_detail {

// Eight activations x[k .. k + 8) as bf16 pairs (zeros for a token row past M).
template <class Act>
__device__ __forceinline__ void load_activations(const Act* p, bool valid, uint32_t (&b)[4]);

template <>
__device__ __forceinline__ void load_activations<__nv_bfloat16>(const __nv_bfloat16* p, bool valid, uint32_t (&b)[4]) {
  const uint4 v = valid ? *reinterpret_cast<const uint4*>(p) : make_uint4(0, 0, 0, 0);
  b[0] = v.x, b[1] = v.y, b[2] = v.z, b[3] = v.w;
}

template <>
__device__ __forceinline__ void load_activations<float>(const float* p, bool valid, uint32_t (&b)[4]) {
  const float4 lo = valid ? reinterpret_cast<const float4*>(p)[0] : make_float4(0, 0, 0, 0);
  const float4 hi = valid ? reinterpret_cast<const float4*>(p)[1] : make_float4(0, 0, 0, 0);
  b[0] = bf162_bits(__floats2bfloat162_rn(lo.x, lo.y));
  b[1] = bf162_bits(__floats2bfloat162_rn(lo.z, lo.w));
  b[2] = bf162_bits(__floats2bfloat162_rn(hi.x, hi.y));
  b[3] = bf162_bits(__floats2bfloat162_rn(hi.z, hi.w));
}

template <>
__device__ __forceinline__ void load_activations<__half>(const __half* p, bool valid, uint32_t (&b)[4]) {
  const uint4 v = valid ? *reinterpret_cast<const uint4*>(p) : make_uint4(0, 0, 0, 0);
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
    b[i] = bf162_bits(__floats2bfloat162_rn(f.x, f.y));
  }
}

template <class Traits, int kTiles, class Act>
__global__ void __launch_bounds__(256, 2) mmvq_kernel(MmvqArgs a) {
  using Tl = MmvqTiling<Traits>;
  extern __shared__ __align__(16) uint8_t smem[];
  const Codebooks cb = shared_codebooks<Traits::kCodebook>(smem);
  uint8_t* const staging = smem + Tl::kCodebookBytes;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * Tl::kRows;
  const int64_t row_bytes = a.k / Traits::kBlockElems * Traits::kBlockBytes;
  const int units = static_cast<int>((a.k + Tl::kUnitElems - 1) / Tl::kUnitElems);
  const int u_begin = warp * units / Tl::kWarps;
  const int u_end = (warp + 1) * units / Tl::kWarps;
  uint8_t* const ring = staging + warp * Tl::kWarpBytes;
  const Act* const x = static_cast<const Act*>(a.x);
  __syncthreads();  // codebook in shared memory

  const RowStager<Tl> stager(a, row0, row_bytes, lane);
  auto stage = [&](int u, int slot) { stager.stage(u, ring + slot * Tl::kStageBytes); };

  float acc[kTiles][4] = {};
  const int64_t row_lo = row0 + g, row_hi = row0 + g + 8;

  // Decodes and multiplies sub-blocks [0, subs) of unit u. With kFull (every unit but a short
  // last one of a 32-weight-block type) the eight sub-blocks unroll without bounds checks, so the
  // compiler interleaves their loads, decodes and MMAs.
  auto compute_unit = [&](int u, int slot, auto full) {
    constexpr bool kFull = decltype(full)::value;
    const uint8_t* st = ring + slot * Tl::kStageBytes;
    const uint8_t* lo = staged_row<Tl>(a, st, g, row_lo, u);
    const uint8_t* hi = staged_row<Tl>(a, st, g + 8, row_hi, u);
    const int64_t k0 = static_cast<int64_t>(u) * Tl::kUnitElems;
    const int subs = kFull ? 8 : static_cast<int>((a.k - k0) / 32);
    uint32_t b[8][kTiles][4];
    auto load_sub = [&](int s, uint32_t (&dst)[kTiles][4]) {
#pragma unroll
      for (int nt = 0; nt < kTiles; ++nt) {
        const int token = nt * 8 + g;
        const bool valid = token < a.m && (kFull || s < subs);
        load_activations<Act>(x + token * a.x_row_stride + k0 + s * 32 + 8 * t, valid, dst[nt]);
      }
    };
#pragma unroll
    for (int s = 0; s < 8; ++s) load_sub(s, b[s]);  // all of the unit's activations: 8 loads in flight
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      if (!kFull && s >= subs) break;
      const int block = Tl::kBlocksPerUnit == 1 ? 0 : s;
      const int group = Tl::kBlocksPerUnit == 1 ? s * 4 + t : t;
      uint8_t scale_lo = 0, scale_hi = 0;
      if constexpr (Traits::kSplitScales) {
        const int64_t sb = k0 / 32 + s;
        scale_lo = row_lo < a.n ? a.scales[row_lo * a.scale_row_stride + sb] : uint8_t{0};
        scale_hi = row_hi < a.n ? a.scales[row_hi * a.scale_row_stride + sb] : uint8_t{0};
      }
      uint32_t wlo[4], whi[4];
      render_bf16(Traits::decode_group(BlockRef{lo + block * Traits::kBlockBytes, scale_lo}, group, cb), wlo);
      render_bf16(Traits::decode_group(BlockRef{hi + block * Traits::kBlockBytes, scale_hi}, group, cb), whi);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const uint32_t frag[4] = {wlo[2 * j], whi[2 * j], wlo[2 * j + 1], whi[2 * j + 1]};
#pragma unroll
        for (int nt = 0; nt < kTiles; ++nt) mma_bf16_m16n8k16(acc[nt], frag, b[s][nt][2 * j], b[s][nt][2 * j + 1]);
      }
    }
  };

  stage_ahead<Tl::kStages>(u_begin, u_end, stage);
  stream_units<Tl::kStages, Tl::kUnitElems>(u_begin, u_end, a.k, stage, compute_unit);
  __syncthreads();  // staging is reused for the cross-warp sum

  reduce_and_store<kTiles, Act>(a, reinterpret_cast<float*>(staging), acc, row0, warp, lane);
}

template <class Traits, int kTiles, class Act>
void launch_mmvq_tiles(const MmvqArgs& a, cudaStream_t stream) {
  using Tl = MmvqTiling<Traits>;
  constexpr int kSmem = Tl::smem_bytes(kTiles);
  auto* kernel = &mmvq_kernel<Traits, kTiles, Act>;
  configure_shared_memory(reinterpret_cast<const void*>(kernel), kSmem, "mmvq (bf16)");
  const unsigned blocks = static_cast<unsigned>((a.n + Tl::kRows - 1) / Tl::kRows);
  kernel<<<blocks, Tl::kThreads, kSmem, stream>>>(a);
  check_launch("mmvq");
}

}  // namespace lowbit::cuda_detail
