// Reading one expert's weight rows group by group, shared by the MoE vector and batched kernels:
// the row's address from 64-bit strides, and eight weights of it decoded with the format's own
// primitive (include/lowbit/formats/), exactly as the CPU reference decodes them.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "cuda/moe/moe_launch.h"
#include "lowbit/formats/all.h"

namespace lowbit::cuda_detail {

// Row `row` of expert e: its block bytes and (split MX types) its E8M0 scales.
struct MoeWeightRow {
  const uint8_t* bytes;
  const uint8_t* scales;
};

__device__ __forceinline__ MoeWeightRow moe_weight_row(const MoeProjArgs& a, int64_t e, int64_t row) {
  MoeWeightRow r;
  r.bytes = a.w + e * a.w_expert_stride + row * a.w_row_stride;
  r.scales = a.scales != nullptr ? a.scales + e * a.scale_expert_stride + row * a.scale_row_stride : nullptr;
  return r;
}

// Weights [8 * group, 8 * group + 8) of a row, as floats.
template <class Traits>
__device__ __forceinline__ void moe_decode_group(const MoeWeightRow& row, int64_t group, const Codebooks& cb,
                                                 float (&v)[8]) {
  constexpr int kGroupsPerBlock = Traits::kBlockElems / kGroupElems;
  const int64_t b = group / kGroupsPerBlock;
  const int g = static_cast<int>(group - b * kGroupsPerBlock);
  const uint8_t split_scale = Traits::kSplitScales ? row.scales[b] : uint8_t{0};
  const BlockRef block{row.bytes + b * Traits::kBlockBytes, split_scale};
  render_f32(Traits::decode_group(block, g, cb), v);
}

// Eight bf16 values (16 bytes) as floats.
__device__ __forceinline__ void bf16x8_to_float(const uint4& u, float (&v)[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = __uint_as_float(w[i] << 16);
    v[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
  }
}

__device__ __forceinline__ uint32_t pack_bf16_pair(float lo, float hi) {
  const __nv_bfloat162 p = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&p);
}

}  // namespace lowbit::cuda_detail
