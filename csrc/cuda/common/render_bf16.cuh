// Decoded groups -> packed bf16 pairs for the tensor cores: four 32-bit words, word p holding
// weights 2p (low half) and 2p + 1 (high half), each the bf16 rounding of scale * value.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "lowbit/formats/common.h"

namespace lowbit::cuda_detail {

__device__ __forceinline__ uint32_t bf162_bits(__nv_bfloat162 v) {
  return *reinterpret_cast<uint32_t*>(&v);
}
__device__ __forceinline__ __nv_bfloat162 bits_bf162(uint32_t u) {
  return *reinterpret_cast<__nv_bfloat162*>(&u);
}

// Magnitudes m <= 128 become bf16 128 + m by placing each byte under the exponent byte 0x43
// (0x4300 | m is 128 + m for m < 128, and 0x4380 is 256 = 128 + 128). One fused multiply-add
// (128 + m) * s - 128 * s then rounds m * s once, and the sign bytes flip the sign bits.
__device__ __forceinline__ void render_bf16(const MagnitudeGroup& g, uint32_t (&out)[4]) {
  const __nv_bfloat162 s2 = __float2bfloat162_rn(g.scale);
  const __nv_bfloat162 minus_128s = __hmul2(s2, __float2bfloat162_rn(-128.0f));
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const uint32_t word = g.mag[p >> 1];
    const uint32_t sel = (p & 1) ? 0x4342u : 0x4140u;  // bytes (2p, 2p+1) of the word, exponent byte 0x43 above
    const uint32_t biased = __byte_perm(word, 0x43434343u, sel);
    const uint32_t sign_sel = (p & 1) ? 0x3424u : 0x1404u;  // sign bytes into the high byte of each half
    const uint32_t sign = __byte_perm(g.neg[p >> 1], 0u, sign_sel);
    out[p] = bf162_bits(__hfma2(bits_bf162(biased), s2, minus_128s)) ^ sign;
  }
}

// Signed bf16 values (word p: weights 2p, 2p + 1) times bf16(scale), each rounded once to nearest
// even: the render of the table decodes (mmq/nibble_pairs_bf16.cuh, mmq/grid_bf16.cuh). For finite
// nonzero scales these are render_bf16's bits: both round m x bf16(s) once, and the rounding is
// symmetric in sign. A scale of -0 flips the sign of a zero product; an infinite one gives inf where
// render_bf16 gives NaN.
__device__ __forceinline__ void scale_bf16_pairs(const uint32_t (&values)[4], float scale, uint32_t (&out)[4]) {
  const __nv_bfloat162 s2 = __float2bfloat162_rn(scale);
#pragma unroll
  for (int p = 0; p < 4; ++p) out[p] = bf162_bits(__hmul2_rn(bits_bf162(values[p]), s2));
}

__device__ __forceinline__ void render_bf16(const Fp8Group& g, uint32_t (&out)[4]) {
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const uint16_t pair = static_cast<uint16_t>(g.e4m3[p >> 1] >> (16 * (p & 1)));
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair), __NV_E4M3);
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
    out[p] = bf162_bits(__floats2bfloat162_rn(f.x * g.scale, f.y * g.scale));
  }
}

}  // namespace lowbit::cuda_detail
