// Tensor maps (TMA descriptors, sm_90) encoded on the host. The driver's encoder is reached
// through the runtime's entry-point query, so that nothing links the driver library; a kernel
// takes a map as a __grid_constant__ parameter of its own.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace lowbit::cuda_detail {

// The driver's cuTensorMapEncodeTiled, or nullptr where the driver has none (queried once).
inline auto tensor_map_encoder() {
  using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                              const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static const Encode encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<Encode>(fn);
  }();
  return encode;
}

// A map of a 3-D array of 32-bit words at `base`: dims[0] words to a row (contiguous), dims[1]
// rows `row_stride` bytes apart, dims[2] planes `plane_stride` bytes apart; each copy moves a box
// of box[0] x box[1] x box[2] words into shared memory in that order, the words outside the array
// as zeros. Returns false where the driver or the TMA's rules refuse it (base and strides in
// 16-byte units, box[0] * 4 bytes in 16-byte units, each box dimension at most 256): the caller
// then takes a path without the map.
inline bool encode_word_map_3d(CUtensorMap* map, const void* base, const cuuint64_t (&dims)[3], cuuint64_t row_stride,
                               cuuint64_t plane_stride, const uint32_t (&box)[3]) {
  const auto encode = tensor_map_encoder();
  if (encode == nullptr || ((reinterpret_cast<uintptr_t>(base) | row_stride | plane_stride | (box[0] * 4u)) & 15) != 0)
    return false;
  for (int i = 0; i < 3; ++i)
    if (dims[i] == 0 || dims[i] > (cuuint64_t{1} << 32) || box[i] == 0 || box[i] > 256) return false;
  const cuuint64_t strides[2] = {row_stride, plane_stride};
  const cuuint32_t unit_steps[3] = {1, 1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT32, 3, const_cast<void*>(base), dims, strides, box, unit_steps,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// A map of a 2-D bf16 array at `base`: dims[0] elements to a row (contiguous), dims[1] rows
// `row_stride` bytes apart; a copy moves a box of box[0] x box[1] elements in the 128-byte swizzle
// (box[0] * 2 bytes must then be 128: one swizzle row per array row), elements outside the array
// as zeros. False where the driver or the TMA's rules refuse it (base and stride in 16-byte units,
// each box dimension at most 256).
inline bool encode_bf16_map_2d_sw128(CUtensorMap* map, const void* base, const cuuint64_t (&dims)[2],
                                     cuuint64_t row_stride, const uint32_t (&box)[2]) {
  const auto encode = tensor_map_encoder();
  if (encode == nullptr || ((reinterpret_cast<uintptr_t>(base) | row_stride) & 15) != 0 || box[0] * 2 != 128)
    return false;
  for (int i = 0; i < 2; ++i)
    if (dims[i] == 0 || dims[i] > (cuuint64_t{1} << 32) || box[i] == 0 || box[i] > 256) return false;
  const cuuint64_t strides[1] = {row_stride};
  const cuuint32_t unit_steps[2] = {1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box, unit_steps,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace lowbit::cuda_detail
