// Float results stored in the output type: at compile time (from_float<Out>) or named at run time
// (store_float_as), shared by the MMVQ, MMQ and MoE kernels' epilogues.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "lowbit/cpu.h"

namespace lowbit::cuda_detail {

template <class Out>
__device__ __forceinline__ Out from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}

// v written as y[i] in a type named at run time (the op's dtype).
__device__ __forceinline__ void store_float_as(void* y, FloatType type, int64_t i, float v) {
  if (type == FloatType::BF16)
    static_cast<__nv_bfloat16*>(y)[i] = from_float<__nv_bfloat16>(v);
  else if (type == FloatType::F16)
    static_cast<__half*>(y)[i] = from_float<__half>(v);
  else
    static_cast<float*>(y)[i] = v;
}

// v.x .. v.w written as y[i] .. y[i + 3] in a type named at run time, one vector store: i a multiple
// of 4 and y aligned to four elements.
__device__ __forceinline__ void store_float4_as(void* y, FloatType type, int64_t i, float4 v) {
  if (type == FloatType::F32) {
    reinterpret_cast<float4*>(static_cast<float*>(y) + i)[0] = v;
  } else if (type == FloatType::BF16) {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
    reinterpret_cast<uint2*>(static_cast<__nv_bfloat16*>(y) + i)[0] =
        make_uint2(reinterpret_cast<const uint32_t&>(lo), reinterpret_cast<const uint32_t&>(hi));
  } else {
    const __half2 lo = __floats2half2_rn(v.x, v.y), hi = __floats2half2_rn(v.z, v.w);
    reinterpret_cast<uint2*>(static_cast<__half*>(y) + i)[0] =
        make_uint2(reinterpret_cast<const uint32_t&>(lo), reinterpret_cast<const uint32_t&>(hi));
  }
}

}  // namespace lowbit::cuda_detail
