// MMQ's bf16 decode of the grid formats from a bf16 copy of the grid (mmq_grid_tables.h): the copy
// each block builds beside the ring, and the decode of one group.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "cuda/common/device_codebooks.cuh"
#include "cuda/common/render_bf16.cuh"
#include "cuda/mmq/mmq_grid_tables.h"

namespace lowbit::cuda_detail {

template <class Traits>
using GridTable = CodebookTable<Traits::kCodebook>;

// Values per grid entry (one byte each in the int8 grid).
template <class Traits>
inline constexpr int kGridValues = static_cast<int>(sizeof(typename GridTable<Traits>::Entry));

// Builds the bf16 copy of Traits' grid into `shared` (kGridBf16Bytes<Traits>, 16-byte aligned)
// with the whole block: word i holds values 2i and 2i + 1 of the grid in entry order, exact (the
// magnitudes are integers below 128). The caller synchronizes before decoding.
template <class Traits>
__device__ __forceinline__ const uint32_t* build_grid_bf16(uint8_t* shared) {
  constexpr int kPairsPerEntry = kGridValues<Traits> / 2;
  constexpr int kWords = GridTable<Traits>::kEntries * kPairsPerEntry;
  static_assert(kWords * 4 == kGridBf16Bytes<Traits>, "mmq_grid_tables.h");
  uint32_t* const words = reinterpret_cast<uint32_t*>(shared);
  for (int i = threadIdx.x; i < kWords; i += blockDim.x) {
    const uint64_t entry = GridTable<Traits>::data()[i / kPairsPerEntry];
    const int shift = 16 * (i % kPairsPerEntry);
    const auto lo = static_cast<float>((entry >> shift) & 0xFFu);
    const auto hi = static_cast<float>((entry >> (shift + 8)) & 0xFFu);
    words[i] = bf162_bits(__floats2bfloat162_rn(lo, hi));
  }
  return words;
}

// A group by reference -> the A-fragment words of its eight weights (word p: weights 2p, 2p + 1),
// each value signed by its sign bit, then times bf16(scale) (scale_bf16_pairs).
template <class Traits>
__device__ __forceinline__ void decode_grid_bf16(const GridCodes& c, const uint32_t* grid, uint32_t (&out)[4]) {
  uint32_t w[4];
  if constexpr (kGridValues<Traits> == 8) {
    const uint4 e = reinterpret_cast<const uint4*>(grid)[c.index[0]];
    w[0] = e.x, w[1] = e.y, w[2] = e.z, w[3] = e.w;
  } else {
    static_assert(kGridValues<Traits> == 4, "grids of four or eight values per entry");
    const uint2 e0 = reinterpret_cast<const uint2*>(grid)[c.index[0]];
    const uint2 e1 = reinterpret_cast<const uint2*>(grid)[c.index[1]];
    w[0] = e0.x, w[1] = e0.y, w[2] = e1.x, w[3] = e1.y;
  }
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    // sign bits 2p and 2p + 1 to bits 15 and 31: the product's copies at 30 and 16 are masked off
    w[p] ^= (((c.signs >> (2 * p)) & 3u) * 0x40008000u) & 0x80008000u;
  }
  scale_bf16_pairs(w, c.scale, out);
}

}  // namespace lowbit::cuda_detail
