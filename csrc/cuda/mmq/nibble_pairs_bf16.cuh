// MMQ's bf16 decode of the nibble formats by pairs (mmq_k_order.h): the table each block builds
// beside the ring, and the decode of one lane's four code bytes of a run.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "cuda/common/device_codebooks.cuh"
#include "cuda/common/render_bf16.cuh"
#include "cuda/mmq/mmq_k_order.h"

namespace lowbit::cuda_detail {

// Entry b of the IQ4 pair table: bf16 of codebook value b & 15 (low half) and b >> 4 (high half),
// exact (integers of at most eight bits). Built by the whole block into `shared`
// (kNibblePairTableBytes); the caller synchronizes before decoding.
__device__ __forceinline__ const uint32_t* build_nibble_pair_table(uint8_t* shared) {
  uint32_t* const table = reinterpret_cast<uint32_t*>(shared);
  for (int b = threadIdx.x; b < 256; b += blockDim.x) {
    const auto lo = static_cast<int8_t>(kKvaluesIq4nlDevice[b & 15]);
    const auto hi = static_cast<int8_t>(kKvaluesIq4nlDevice[b >> 4]);
    table[b] = bf162_bits(__floats2bfloat162_rn(static_cast<float>(lo), static_cast<float>(hi)));
  }
  return table;
}

// Four code bytes of a run (byte i: weights 4t + i and 4t + i + 16) -> the A-fragment words of
// decoded positions 8t .. 8t + 7, word i the pair of byte i times bf16(scale) (scale_bf16_pairs).
__device__ __forceinline__ void decode_nibble_pairs(uint32_t codes, float scale, const uint32_t* table,
                                                    uint32_t (&out)[4]) {
  uint32_t pairs[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) pairs[i] = table[(codes >> (8 * i)) & 0xFFu];
  scale_bf16_pairs(pairs, scale, out);
}

}  // namespace lowbit::cuda_detail
