// MMQ's bf16 decode of the nibble formats by pairs (mmq_k_order.h): the table each block builds
// beside the ring, the same pairs from byte_perm lookups in registers, and the decode of one
// lane's four code bytes of a run.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "cuda/common/device_codebooks.cuh"
#include "cuda/common/render_bf16.cuh"
#include "cuda/mmq/mmq_k_order.h"

namespace lowbit::cuda_detail {

// Entry b of the IQ4 pair table: bf16 of codebook value b & 15 (low half) and b >> 4 (high half),
// exact (integers of at most eight bits). kCopies copies interleaved by word (entry b of copy c at
// word kCopies b + c): with one per lane a warp's lookups meet no bank conflict. Built by the whole
// block into `shared` (kCopies * kNibblePairTableBytes); the caller synchronizes before decoding.
template <int kCopies>
__device__ __forceinline__ const uint32_t* build_nibble_pair_table(uint8_t* shared) {
  static_assert(kCopies == 1 || kCopies == 32, "one table, or one per lane");
  uint32_t* const table = reinterpret_cast<uint32_t*>(shared);
  for (int i = threadIdx.x; i < 256 * kCopies; i += blockDim.x) {
    const int b = i / kCopies;
    const auto lo = static_cast<int8_t>(kKvaluesIq4nlDevice[b & 15]);
    const auto hi = static_cast<int8_t>(kKvaluesIq4nlDevice[b >> 4]);
    table[i] = bf162_bits(__floats2bfloat162_rn(static_cast<float>(lo), static_cast<float>(hi)));
  }
  return table;
}

// Writable for the reason kKvaluesIq4nlDevice is (device_codebooks.cuh): loaded once, the words
// stay in vector registers. Nothing writes them.
static __device__ __align__(16) uint32_t kIq4Bf16BytesDevice[8] = {
    iq4_bf16_byte_word(false, 0), iq4_bf16_byte_word(false, 1), iq4_bf16_byte_word(false, 2),
    iq4_bf16_byte_word(false, 3), iq4_bf16_byte_word(true, 0),  iq4_bf16_byte_word(true, 1),
    iq4_bf16_byte_word(true, 2),  iq4_bf16_byte_word(true, 3)};

// The byte tables in registers (lo: low bytes, hi: high bytes of the bf16 values).
struct NibbleByteTables {
  uint32_t lo[4], hi[4];
};
__device__ __forceinline__ NibbleByteTables load_nibble_byte_tables() {
  const uint4 lo = reinterpret_cast<const uint4*>(kIq4Bf16BytesDevice)[0];
  const uint4 hi = reinterpret_cast<const uint4*>(kIq4Bf16BytesDevice)[1];
  return {{lo.x, lo.y, lo.z, lo.w}, {hi.x, hi.y, hi.z, hi.w}};
}

// Four code bytes of a run (byte i: weights 4t + i and 4t + i + 16) -> the A-fragment words of
// decoded positions 8t .. 8t + 7, word i the pair of byte i times bf16(scale) (scale_bf16_pairs).
// With kLowHalfInRegisters, bytes 0 and 1 take byte_perm lookups in `tables`
// (nibble_pairs_from_tables): four byte_perms per byte and its share of the selector arithmetic,
// where the table takes an address and a load that meets bank conflicts with one copy. The other
// bytes read the pair table; `lane`: this thread's lane (read with a table per lane).
template <int kCopies, bool kLowHalfInRegisters>
__device__ __forceinline__ void decode_nibble_pairs(uint32_t codes, float scale, const uint32_t* table,
                                                    const NibbleByteTables& tables, uint32_t lane, uint32_t (&out)[4]) {
  uint32_t pairs[4];
  constexpr int kFirstFromTable = kLowHalfInRegisters ? 2 : 0;
  if constexpr (kLowHalfInRegisters) {
    uint32_t low[2];
    nibble_pairs_from_tables(codes, tables.lo, tables.hi, low);
    pairs[0] = low[0], pairs[1] = low[1];
  }
#pragma unroll
  for (int i = kFirstFromTable; i < 4; ++i) {
    if constexpr (kCopies == 1) {
      pairs[i] = table[(codes >> (8 * i)) & 0xFFu];
    } else {
      pairs[i] = table[(((codes >> (8 * i)) << 5) & 0x1FE0u) | lane];  // word 32 b + lane
    }
  }
  scale_bf16_pairs(pairs, scale, out);
}

}  // namespace lowbit::cuda_detail
