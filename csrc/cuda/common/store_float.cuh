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

}  // namespace lowbit::cuda_detail
