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
// exact (integers of at most eight bits). kCopies copies interleaved by word (entry b of copy c at
// word kCopies b + c): with one per lane a warp's lookups meet no bank conflict. Built by the
// block's kThreads threads into `shared` (kCopies * kNibblePairTableBytes); the caller
// synchronizes before decoding. The passes unrolled, so that every pass's codebook loads are in
// flight at once: in a loop over blockDim each pass waited for its own, which at 32 copies
// (32 KB) showed in the profile of the wide grouped tile (benchmarks/NOTES.md).
template <int kCopies, int kThreads>
__device__ __forceinline__ const uint32_t* build_nibble_pair_table(uint8_t* shared) {
  static_assert(kCopies == 1 || kCopies == 32, "one table, or one per lane");
  static_assert(256 * kCopies % kThreads == 0, "whole passes of the block");
  uint32_t* const table = reinterpret_cast<uint32_t*>(shared);
#pragma unroll
  for (int pass = 0; pass < 256 * kCopies / kThreads; ++pass) {
    const int i = static_cast<int>(threadIdx.x) + kThreads * pass;
    const int b = i / kCopies;
    const auto lo = static_cast<int8_t>(kKvaluesIq4nlDevice[b & 15]);
    const auto hi = static_cast<int8_t>(kKvaluesIq4nlDevice[b >> 4]);
    table[i] = bf162_bits(__floats2bfloat162_rn(static_cast<float>(lo), static_cast<float>(hi)));
  }
  return table;
}

// Four code bytes of a run (byte i: weights 4t + i and 4t + i + 16) -> the A-fragment words of
// decoded positions 8t .. 8t + 7, word i the pair of byte i times bf16(scale) (scale_bf16_pairs).
// `lane`: this thread's lane (read with a table per lane).
template <int kCopies>
__device__ __forceinline__ void decode_nibble_pairs(uint32_t codes, float scale, const uint32_t* table, uint32_t lane,
                                                    uint32_t (&out)[4]) {
  uint32_t pairs[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (kCopies == 1) {
      pairs[i] = table[(codes >> (8 * i)) & 0xFFu];
    } else {
      pairs[i] = table[(((codes >> (8 * i)) << 5) & 0x1FE0u) | lane];  // word 32 b + lane
    }
  }
  scale_bf16_pairs(pairs, scale, out);
}

}  // namespace lowbit::cuda_detail
