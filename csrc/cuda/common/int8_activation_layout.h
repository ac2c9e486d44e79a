// Where the int8 prologue (int8_activations.cuh) puts M rows of quantized activations in its
// workspace, as plain C++ so that the planners (src/) size the workspace as the kernels read it.
// Rows come in chunks of eight: chunk c's scales are [K/32][8] floats (rows 8c .. 8c + 7, zero
// past M) so that one 16-byte copy takes a sub-block's scales of eight rows; all chunks' scales
// come first, then the codes [M][K] int8.
#pragma once

#include <cstdint>

namespace lowbit::cuda_detail {

// Floats of one chunk's scales: K/32 sub-blocks x 8 rows (K bytes).
constexpr int64_t int8_scale_chunk_floats(int64_t k) {
  return k / 4;
}

// Bytes of the scales of M rows: where the codes start.
constexpr int64_t int8_scale_bytes(int64_t m, int64_t k) {
  return (m + 7) / 8 * int8_scale_chunk_floats(k) * 4;
}

// Bytes of the prologue's output for M rows: ceil(M/8) chunks of scales, then the codes.
constexpr int64_t int8_activation_bytes(int64_t m, int64_t k) {
  return int8_scale_bytes(m, k) + m * k;
}

}  // namespace lowbit::cuda_detail
