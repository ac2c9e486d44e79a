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

// A tiled map of a kRank-D array at `base` (elements of elem_bytes; dims[0] contiguous, dimension
// i + 1 strides[i] bytes apart), boxes copied into shared memory in that order (with `swizzle`),
// elements outside the array as zeros. False where the driver or the TMA's rules refuse it (base and
// strides in 16-byte units, box[0] in 16-byte units, each box dimension at most 256): the caller
// then takes a path without the map, or reports it.
template <int kRank>
bool encode_tiled_map(CUtensorMap* map, CUtensorMapDataType type, uint32_t elem_bytes, CUtensorMapSwizzle swizzle,
                      const void* base, const cuuint64_t (&dims)[kRank], const cuuint64_t (&strides)[kRank - 1],
                      const uint32_t (&box)[kRank]) {
  const auto encode = tensor_map_encoder();
  uint64_t aligned = reinterpret_cast<uintptr_t>(base) | (box[0] * elem_bytes);
  for (int i = 0; i < kRank - 1; ++i) aligned |= strides[i];
  if (encode == nullptr || (aligned & 15) != 0) return false;
  for (int i = 0; i < kRank; ++i)
    if (dims[i] == 0 || dims[i] > (cuuint64_t{1} << 32) || box[i] == 0 || box[i] > 256) return false;
  cuuint32_t unit_steps[kRank];
  for (int i = 0; i < kRank; ++i) unit_steps[i] = 1;
  return encode(map, type, kRank, const_cast<void*>(base), dims, strides, box, unit_steps,
                CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// A map of a 3-D array of 32-bit words: dims[0] words to a row, dims[1] rows `row_stride` bytes
// apart, dims[2] planes `plane_stride` bytes apart; boxes unswizzled.
inline bool encode_word_map_3d(CUtensorMap* map, const void* base, const cuuint64_t (&dims)[3], cuuint64_t row_stride,
                               cuuint64_t plane_stride, const uint32_t (&box)[3]) {
  const cuuint64_t strides[2] = {row_stride, plane_stride};
  return encode_tiled_map<3>(map, CU_TENSOR_MAP_DATA_TYPE_UINT32, 4, CU_TENSOR_MAP_SWIZZLE_NONE, base, dims, strides,
                             box);
}

// A map of a 2-D bf16 array: dims[0] elements to a row, dims[1] rows `row_stride` bytes apart;
// boxes in the 128-byte swizzle, so box[0] * 2 bytes must be 128 (one swizzle row per array row).
inline bool encode_bf16_map_2d_sw128(CUtensorMap* map, const void* base, const cuuint64_t (&dims)[2],
                                     cuuint64_t row_stride, const uint32_t (&box)[2]) {
  const cuuint64_t strides[1] = {row_stride};
  return box[0] * 2 == 128 && encode_tiled_map<2>(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, CU_TENSOR_MAP_SWIZZLE_128B,
                                                  base, dims, strides, box);
}

}  // namespace lowbit::cuda_detail
