// The int8 form of the activations: per token and 32 weights, d = amax * (1/127),
// q = rint(x * (127 / amax)) (ggml's q8_1 precision, without its sum), each 32-weight run in the
// weight format's I8Order. The int8 MMVQ kernels multiply these codes with the weights' codes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/common/int8_activation_layout.h"
#include "cuda/common/ptx.cuh"
#include "cuda/mmvq/mmvq_args.h"
#include "lowbit/formats/common.h"

namespace lowbit::cuda_detail {

// Quantizes a thread's eight activations (a 32-weight sub-block is four consecutive threads) to
// int8 with the sub-block's scale, returning the scale. Round to nearest even via the float
// adder: 1.5 * 2^23 + q has q (two's complement) in its low byte.
// A NaN activation makes the sub-block's scale NaN (fmaxf alone would drop it), so that NaN
// reaches the output as it does through the bf16 arithmetic.
__device__ __forceinline__ float max_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

__device__ __forceinline__ float quantize8(const float (&v)[8], uint32_t (&q)[2]) {
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) amax = max_nan(fabsf(v[i]), amax);
  amax = max_nan(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 1));
  amax = max_nan(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 2));
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  uint32_t b[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) b[i] = __float_as_uint(__fmaf_rn(v[i], inv, 12582912.0f));
#pragma unroll
  for (int h = 0; h < 2; ++h)
    q[h] = __byte_perm(__byte_perm(b[4 * h], b[4 * h + 1], 0x0040u), __byte_perm(b[4 * h + 2], b[4 * h + 3], 0x0040u),
                       0x5410u);
  return amax * (1.0f / 127.0f);
}

template <class Act>
__device__ __forceinline__ void load4_f32(const Act* p, float* f) {
  if constexpr (std::is_same_v<Act, float>) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    f[0] = v.x, f[1] = v.y, f[2] = v.z, f[3] = v.w;
  } else {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    const uint32_t w[2] = {v.x, v.y};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float2 h;
      if constexpr (std::is_same_v<Act, __half>) {
        h = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      } else {  // a bf16 is the upper half of its float: one shift or mask each
        h.x = __uint_as_float(w[i] << 16);
        h.y = __uint_as_float(w[i] & 0xFFFF0000u);
      }
      f[2 * i] = h.x, f[2 * i + 1] = h.y;
    }
  }
}

// Loads the eight activations of int8 group `group % 4` of sub-block `group / 4` of `token`
// (elements i8_element(kOrder, .)): kNibbleInterleaved gathers 4t.. and 4t + 16.., alternating.
template <class Act, I8Order kOrder>
__device__ __forceinline__ void load_i8_group(const MmvqArgs& a, int token, int64_t group, float (&v)[8]) {
  const Act* row = static_cast<const Act*>(a.x) + token * a.x_row_stride + 32 * (group >> 2);
  const int t = static_cast<int>(group & 3);
  if constexpr (kOrder == I8Order::kContiguous) {
    load4_f32(row + 8 * t, v);
    load4_f32(row + 8 * t + 4, v + 4);
  } else {
    float lo[4], hi[4];
    load4_f32(row + 4 * t, lo);
    load4_f32(row + 16 + 4 * t, hi);
#pragma unroll
    for (int j = 0; j < 4; ++j) v[2 * j] = lo[j], v[2 * j + 1] = hi[j];
  }
}

// The int8 prologue: thread (token, group) quantizes int8 group `group` of the token and stores
// its codes at xq[token][8 * group], its scale in the token's chunk of eight
// (int8_activation_layout.h). Tokens M .. 8 * ceil(M / 8) - 1 write zero scales.
template <class Act, I8Order kOrder>
__global__ void __launch_bounds__(256) quantize_activations_kernel(MmvqArgs a, uint8_t* xq, float* xs) {
  // The activations may be the output of the kernel before (this is a programmatic launch too);
  // once that one has finished, the MMVQ kernel may start staging weights.
  pdl_wait_for_primary();
  pdl_launch_dependents();
  const int64_t groups = a.k / 8;
  const int64_t tokens = (a.m + 7) / 8 * 8;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool active = i < tokens * groups;  // whole quads: groups is a multiple of 4
  const int64_t token = active ? i / groups : 0;
  const int64_t group = active ? i - token * groups : 0;
  float v[8] = {};
  if (active && token < a.m) load_i8_group<Act, kOrder>(a, static_cast<int>(token), group, v);
  uint32_t q[2];
  const float d = quantize8(v, q);
  if (!active) return;
  if (token < a.m) *reinterpret_cast<uint2*>(xq + token * a.k + 8 * group) = make_uint2(q[0], q[1]);
  if ((group & 3) == 0) xs[(token >> 3) * int8_scale_chunk_floats(a.k) + (group >> 2) * 8 + (token & 7)] = d;
}

}  // namespace lowbit::cuda_detail
