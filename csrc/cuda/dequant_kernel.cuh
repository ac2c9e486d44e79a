// Dequantization kernel: one thread per group of eight weights, decoded with the format's own
// primitive and rendered exactly as the CPU reference does (float32 bit-exact; bf16 / fp16 as
// the correctly rounded float32 values), stored 16 bytes at a time.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/device_codebooks.cuh"
#include "cuda/launch.h"
#include "lowbit/formats/all.h"

namespace lowbit::cuda_detail {

template <class Out>
__device__ __forceinline__ void store_group(Out* dst, const float (&v)[8]);

template <>
__device__ __forceinline__ void store_group<float>(float* dst, const float (&v)[8]) {
  reinterpret_cast<float4*>(dst)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(dst)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

template <>
__device__ __forceinline__ void store_group<__nv_bfloat16>(__nv_bfloat16* dst, const float (&v)[8]) {
  uint4 packed;
  uint32_t* w = reinterpret_cast<uint32_t*>(&packed);
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * p], v[2 * p + 1]);
    w[p] = *reinterpret_cast<const uint32_t*>(&h);
  }
  *reinterpret_cast<uint4*>(dst) = packed;
}

template <>
__device__ __forceinline__ void store_group<__half>(__half* dst, const float (&v)[8]) {
  uint4 packed;
  uint32_t* w = reinterpret_cast<uint32_t*>(&packed);
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const __half2 h = __floats2half2_rn(v[2 * p], v[2 * p + 1]);
    w[p] = *reinterpret_cast<const uint32_t*>(&h);
  }
  *reinterpret_cast<uint4*>(dst) = packed;
}

inline constexpr int kDequantThreads = 256;

// grid.x tiles the groups of a row, grid.y strides over rows; 32-bit index math per thread.
template <class Traits, class Out>
__global__ void __launch_bounds__(kDequantThreads) dequant_kernel(DequantArgs a) {
  constexpr int kGroupsPerBlock = Traits::kBlockElems / kGroupElems;
  const Codebooks cb = global_codebooks<Traits::kCodebook>();
  const int groups_per_row = static_cast<int>(a.k / kGroupElems);
  const int gr = blockIdx.x * kDequantThreads + threadIdx.x;
  if (gr >= groups_per_row) return;
  const int b = gr / kGroupsPerBlock;
  const int g = gr - b * kGroupsPerBlock;
  for (int64_t r = blockIdx.y; r < a.rows; r += gridDim.y) {
    const uint8_t* row = a.data + r * a.row_stride;
    const uint8_t split_scale = Traits::kSplitScales ? a.scales[r * a.scale_row_stride + b] : uint8_t{0};
    float v[8];
    render_f32(Traits::decode_group(BlockRef{row + static_cast<int64_t>(b) * Traits::kBlockBytes, split_scale}, g, cb), v);
    store_group(static_cast<Out*>(a.out) + r * a.out_row_stride + static_cast<int64_t>(gr) * kGroupElems, v);
  }
}

template <class Traits, class Out>
void launch_dequant_as(const DequantArgs& a, cudaStream_t stream) {
  const int groups_per_row = static_cast<int>(a.k / kGroupElems);
  const unsigned gx = static_cast<unsigned>((groups_per_row + kDequantThreads - 1) / kDequantThreads);
  const unsigned gy = static_cast<unsigned>(a.rows < 65535 ? a.rows : 65535);
  if (a.rows == 0) return;
  dequant_kernel<Traits, Out><<<dim3(gx, gy), kDequantThreads, 0, stream>>>(a);
  check_launch("dequantize");
}

template <QuantType T>
void launch_dequant(const DequantArgs& a, FloatType out_type, cudaStream_t stream) {
  using Traits = FormatTraits<T>;
  switch (out_type) {
    case FloatType::F32:
      return launch_dequant_as<Traits, float>(a, stream);
    case FloatType::BF16:
      return launch_dequant_as<Traits, __nv_bfloat16>(a, stream);
    case FloatType::F16:
      return launch_dequant_as<Traits, __half>(a, stream);
  }
}

}  // namespace lowbit::cuda_detail
