// Dequantization kernel: a thread decodes one or two groups of eight weights in each of four rows
// with the format's own primitive and renders them exactly as the CPU reference does (float32
// bit-exact; bf16 / fp16 as the correctly rounded float32 values), stored 16 bytes at a time.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "cuda/common/device_codebooks.cuh"
#include "cuda/common/launch.h"
#include "cuda/common/render_bf16.cuh"
#include "cuda/dequant/dequant_launch.h"
#include "cuda/tuning/tuning.h"
#include "lowbit/formats/all.h"

namespace lowbit::cuda_detail {

// One 16-byte store. Spelled out: for one group per thread nvcc split a uint4 assignment through
// a 2-byte element pointer into four 32-bit stores (bf16 / fp16 outputs of one-group formats).
__device__ __forceinline__ void store_16_bytes(void* dst, const uint32_t (&w)[4]) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(__cvta_generic_to_global(dst)), "r"(w[0]), "r"(w[1]),
               "r"(w[2]), "r"(w[3])
               : "memory");
}

// Two floats as one word of Out pairs (bf16 / fp16, correctly rounded).
template <class Out>
__device__ __forceinline__ uint32_t pack_pair(float a, float b) {
  if constexpr (std::is_same_v<Out, __half>) {
    const __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    static_assert(std::is_same_v<Out, __nv_bfloat16>, "bf16 or fp16 pairs");
    return bf162_bits(__floats2bfloat162_rn(a, b));
  }
}

// Eight values to 8 consecutive outputs (16 bytes of bf16 / fp16, 32 of float).
template <class Out>
__device__ __forceinline__ void store_group(Out* dst, const float (&v)[8]) {
  if constexpr (std::is_same_v<Out, float>) {
    reinterpret_cast<float4*>(dst)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(dst)[1] = make_float4(v[4], v[5], v[6], v[7]);
  } else {
    const uint32_t w[4] = {pack_pair<Out>(v[0], v[1]), pack_pair<Out>(v[2], v[3]), pack_pair<Out>(v[4], v[5]),
                           pack_pair<Out>(v[6], v[7])};
    store_16_bytes(dst, w);
  }
}

// Four values to 4 consecutive outputs (8 bytes of bf16 / fp16, 16 of float).
template <class Out>
__device__ __forceinline__ void store_four(Out* dst, float v0, float v1, float v2, float v3) {
  if constexpr (std::is_same_v<Out, float>) {
    *reinterpret_cast<float4*>(dst) = make_float4(v0, v1, v2, v3);
  } else {
    asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(__cvta_generic_to_global(dst)), "r"(pack_pair<Out>(v0, v1)),
                 "r"(pack_pair<Out>(v2, v3))
                 : "memory");
  }
}

// Int8 group gi of a block (decode_i8 order) times its scale, stored where its weights go:
// scale * code is the float the reference computes (one rounding), so the output is the same.
template <class Traits, class Out>
__device__ __forceinline__ void store_int8_group(Out* block_out, int gi, const Int8Group& q, float scale) {
  float v[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = scale * static_cast<float>(static_cast<int8_t>(q.q[j >> 2] >> (8 * (j & 3))));
  if constexpr (Traits::kI8Order == I8Order::kContiguous) {
    store_group(block_out + 8 * gi, v);
  } else {  // even bytes are 4 consecutive weights, odd bytes the 4 that sit 16 further on
    Out* dst = block_out + i8_element(Traits::kI8Order, gi, 0);
    store_four(dst, v[0], v[2], v[4], v[6]);
    store_four(dst + 16, v[1], v[3], v[5], v[7]);
  }
}

inline constexpr int kDequantThreads = 256;

// Per thread: kRows rows (independent decodes in flight) x kGroups groups of one block per row,
// groups h and h + G / 2 of a block of G groups, so that each store instruction of a warp writes
// whole 32-byte sectors. Two groups share their block's scale (built once) and halve the threads;
// one group where two measured slower, and the int8 form (kViaInt8: one lookup per 8 weights,
// lanes t = 0..3 of a sub-block filling whole sectors) for the IQ4 formats: tuning/sm90.h.
template <class Traits>
struct DequantShape {
  static constexpr tuning::DequantRow kRow = tuning::dequant_row(Traits::kType);
  static constexpr bool kViaInt8 = kRow.via_int8;
  // the int8 decode takes no split scale (BlockRef{block, 0}): a row naming a split type is wrong
  static_assert(!kViaInt8 || !Traits::kSplitScales, "the int8 dequantize reads no split scales");
  static constexpr int kGroups = kRow.groups;
  static constexpr int kRows = 4;
};

// grid.x tiles a row's groups kGroups per thread; grid.y tiles rows kRows at a time (striding
// past 65535 * kRows rows); 32-bit index math per thread.
template <class Traits, class Out>
__global__ void __launch_bounds__(kDequantThreads) dequant_kernel(DequantArgs a) {
  using Shape = DequantShape<Traits>;
  constexpr int kDequantRows = Shape::kRows, kDequantGroups = Shape::kGroups;
  constexpr int kGroupsPerBlock = Traits::kBlockElems / kGroupElems;
  constexpr int kStride = kGroupsPerBlock / kDequantGroups;  // between a thread's groups
  static_assert(kGroupsPerBlock % kDequantGroups == 0, "a thread's groups share one block");
  const Codebooks cb = global_codebooks<Traits::kCodebook>();
  const int threads_per_row = static_cast<int>(a.k / (kGroupElems * kDequantGroups));  // K: whole blocks
  const int tr = blockIdx.x * kDequantThreads + threadIdx.x;
  if (tr >= threads_per_row) return;
  const int b = tr / kStride;
  const int g = tr - b * kStride;
  for (int64_t r0 = static_cast<int64_t>(blockIdx.y) * kDequantRows; r0 < a.rows;
       r0 += static_cast<int64_t>(gridDim.y) * kDequantRows) {
    if constexpr (Shape::kViaInt8) {
      static_assert(Traits::kCodebook == Codebook::kNone && Traits::kI8ScaleElems == 32, "IQ4-like formats");
      Int8Group q[kDequantRows][kDequantGroups];
      float scale[kDequantRows][kDequantGroups];
#pragma unroll
      for (int i = 0; i < kDequantRows; ++i) {
        const int64_t r = r0 + i < a.rows ? r0 + i : a.rows - 1;
        const BlockRef block{a.data + r * a.row_stride + static_cast<int64_t>(b) * Traits::kBlockBytes, 0};
#pragma unroll
        for (int j = 0; j < kDequantGroups; ++j) {
          const int gi = g + j * kStride;
          q[i][j] = Traits::decode_i8(block, gi, cb);
          scale[i][j] = Traits::scale_i8(block, gi / 4);  // 32-weight sub-block
        }
      }
#pragma unroll
      for (int i = 0; i < kDequantRows; ++i)
        if (r0 + i < a.rows) {
          Out* block_out = static_cast<Out*>(a.out) + (r0 + i) * a.out_row_stride +
                           static_cast<int64_t>(b) * kGroupsPerBlock * kGroupElems;
#pragma unroll
          for (int j = 0; j < kDequantGroups; ++j)
            store_int8_group<Traits>(block_out, g + j * kStride, q[i][j], scale[i][j]);
        }
    } else {
      float v[kDequantRows][kDequantGroups][8];
#pragma unroll
      for (int i = 0; i < kDequantRows; ++i) {
        const int64_t r = r0 + i < a.rows ? r0 + i : a.rows - 1;  // a short last tile repeats its last row
        const uint8_t* row = a.data + r * a.row_stride;
        const uint8_t split_scale = Traits::kSplitScales ? a.scales[r * a.scale_row_stride + b] : uint8_t{0};
        const BlockRef block{row + static_cast<int64_t>(b) * Traits::kBlockBytes, split_scale};
#pragma unroll
        for (int j = 0; j < kDequantGroups; ++j) render_f32(Traits::decode_group(block, g + j * kStride, cb), v[i][j]);
      }
#pragma unroll
      for (int i = 0; i < kDequantRows; ++i)
        if (r0 + i < a.rows) {
          Out* dst = static_cast<Out*>(a.out) + (r0 + i) * a.out_row_stride +
                     (static_cast<int64_t>(b) * kGroupsPerBlock + g) * kGroupElems;
#pragma unroll
          for (int j = 0; j < kDequantGroups; ++j) store_group(dst + j * kStride * kGroupElems, v[i][j]);
        }
    }
  }
}

template <class Traits, class Out>
void launch_dequant_as(const DequantArgs& a, cudaStream_t stream) {
  using Shape = DequantShape<Traits>;
  if (a.rows == 0) return;
  const int threads_per_row = static_cast<int>(a.k / (kGroupElems * Shape::kGroups));
  const unsigned gx = static_cast<unsigned>((threads_per_row + kDequantThreads - 1) / kDequantThreads);
  const int64_t row_tiles = (a.rows + Shape::kRows - 1) / Shape::kRows;
  const unsigned gy = static_cast<unsigned>(row_tiles < 65535 ? row_tiles : 65535);
  dequant_kernel<Traits, Out><<<dim3(gx, gy), kDequantThreads, 0, stream>>>(a);
  check_launch("dequantize");
}

template <QuantType T>
void launch_dequant(const DequantArgs& a, FloatType out_type, cudaStream_t stream) {
  using Traits = FormatTraits<T>;
  switch (out_type) {
    case FloatType::F32:
      return launch_dequant_as<Traits, float>(a, stream);
    case FloatType::BF16:
      return launch_dequant_as<Traits, __nv_bfloat16>(a, stream);
    case FloatType::F16:
      return launch_dequant_as<Traits, __half>(a, stream);
  }
}

}  // namespace lowbit::cuda_detail
