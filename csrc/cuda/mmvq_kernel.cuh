// MMVQ: y = x W^T for up to 16 tokens in one pass over the quantized weight.
//
// A block owns 16 weight rows (one tensor-core tile) over the whole K; its 8 warps split K into
// 256-element units. Each warp streams its units' bytes for the 16 rows into a private ring of
// shared-memory stages with cp.async (16-byte copies of the aligned span around the unit, so the
// GGUF bytes stay unaligned and unchanged), decodes them with the format's decode primitive to
// bf16 pairs, and multiplies on tensor cores (mma m16n8k16, float32 accumulate) against the
// activations, read as bf16 from L1. K order inside a 32-weight sub-block is permuted so that a
// lane's eight decoded weights are exactly its A fragment: lane (g, t) decodes weights
// [8t, 8t + 8) of rows g and g + 8 and loads x[token g][8t, 8t + 8) as its B fragment. Warps'
// partial sums meet in shared memory at the end (deterministic order).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/device_codebooks.cuh"
#include "cuda/launch.h"
#include "cuda/ptx.cuh"
#include "cuda/render_bf16.cuh"
#include "lowbit/formats/all.h"

namespace lowbit::cuda_detail {

template <class Traits>
struct MmvqTiling {
  static constexpr int kRows = 16;
  static constexpr int kUnitElems = 256;
  static constexpr int kBlocksPerUnit = kUnitElems / Traits::kBlockElems;
  static constexpr int kUnitBytes = kBlocksPerUnit * Traits::kBlockBytes;
  // The 16-byte-aligned span holding a unit reaches at most 15 bytes past either end. Lanes read
  // rows g = 0..7 of a stage at once: an odd number of 16-byte pieces per row puts the eight rows
  // in eight different bank groups (an even count gave 2- to 8-way conflicts, e.g. IQ3_XXS).
  static constexpr int kSpanPieces = (kUnitBytes + 30 + 15) / 16;
  static constexpr int kSpanBytes = 16 * (kSpanPieces | 1);
  static constexpr int kChunks = kSpanBytes / 16;
  static constexpr int kStageBytes = kRows * kSpanBytes;
  static constexpr int kStages = kStageBytes <= 3072 ? 3 : 2;
  static constexpr int kWarpBytes = kStages * kStageBytes;
  // Warps (K slices) per 16-row tile: an N = 4096 layer is 256 blocks, all resident at two blocks
  // per SM (<= 128 registers per thread). 16 warps at <= 64 registers was measured slower.
  static constexpr int kWarps = 8;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kCodebookBytes = CodebookTable<Traits::kCodebook>::kBytes;
  static constexpr int reduce_bytes(int tiles) { return kWarps * tiles * 4 * 32 * 4; }
  static constexpr int smem_bytes(int tiles) {
    const int staging = kWarps * kWarpBytes;
    return kCodebookBytes + (staging > reduce_bytes(tiles) ? staging : reduce_bytes(tiles));
  }
};

// Copies units of a warp's 16 rows into its ring stages with cp.async, 16-byte copies of the
// aligned span around each row's unit (the bytes before or after the unit belong to the tensor:
// neighbouring units or rows). Where the tile's rows all exist, share one alignment (row stride a
// multiple of 16) and their spans end inside the tensor, one copy instruction covers whole spans
// of 2 or 4 rows, so that it touches few cache lines (lanes spread over 16 rows made each copy
// about seven times as many shared-memory wavefronts as a contiguous one). Elsewhere lanes 2r and
// 2r + 1 copy row r's pieces, byte by byte past the tensor's very end; rows past N are zero-filled.
template <class Tl>
struct RowStager {
  static constexpr int kLanesPerRow = Tl::kChunks <= 8 ? 8 : 16;
  static constexpr int kRowsPerCopy = 32 / kLanesPerRow;
  static constexpr int kCopiesPerRow = (Tl::kChunks + kLanesPerRow - 1) / kLanesPerRow;

  const uint8_t* row;   // this lane's row, nullptr past N
  const uint8_t* tile;  // the tile's first row
  const uint8_t* w_end;
  int64_t row_bytes, stride;
  int64_t lane_src;  // this lane's first piece relative to the aligned span of row 0
  int lane_dst, lane_chunk;
  bool whole_tile;  // all 16 rows exist and share one alignment
  int r, half;

  __device__ __forceinline__ RowStager(const MmvqArgs& a, int64_t row0, int64_t row_bytes_, int lane)
      : row_bytes(row_bytes_), stride(a.w_row_stride), r(lane >> 1), half(lane & 1) {
    w_end = a.w + (a.n - 1) * a.w_row_stride + row_bytes;
    row = row0 + r < a.n ? a.w + (row0 + r) * a.w_row_stride : nullptr;
    tile = a.w + row0 * a.w_row_stride;
    whole_tile = row0 + Tl::kRows <= a.n && a.w_row_stride % 16 == 0;
    const int copy_row = lane / kLanesPerRow;
    lane_chunk = lane % kLanesPerRow;
    lane_src = copy_row * stride + 16 * lane_chunk;
    lane_dst = copy_row * Tl::kSpanBytes + 16 * lane_chunk;
  }

  // Issues the copies of unit u into a stage and commits them as one cp.async group.
  __device__ __forceinline__ void stage(int u, uint8_t* stage_base) const {
    issue(u, stage_base);
    cp_async_commit();
  }

  __device__ __forceinline__ void issue(int u, uint8_t* stage_base) const {
    const int64_t start = static_cast<int64_t>(u) * Tl::kUnitBytes;
    if (whole_tile) {
      const uint8_t* base =
          reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(tile + start) & ~uintptr_t{15});
      if (base + (Tl::kRows - 1) * stride + Tl::kSpanBytes <= w_end) {
        const uint8_t* src = base + lane_src;
        uint8_t* dst = stage_base + lane_dst;
#pragma unroll
        for (int i = 0; i < Tl::kRows / kRowsPerCopy; ++i)
#pragma unroll
          for (int j = 0; j < kCopiesPerRow; ++j)
            if (lane_chunk + j * kLanesPerRow < Tl::kChunks)
              cp_async_16(dst + (i * kRowsPerCopy) * Tl::kSpanBytes + 16 * j * kLanesPerRow,
                          src + (i * kRowsPerCopy) * stride + 16 * j * kLanesPerRow, 16);
        return;
      }
    }
    uint8_t* dst = stage_base + r * Tl::kSpanBytes;
    if (row == nullptr) {
      for (int ch = half; ch < Tl::kChunks; ch += 2) *reinterpret_cast<uint4*>(dst + 16 * ch) = make_uint4(0, 0, 0, 0);
    } else {
      const int64_t len = row_bytes - start < Tl::kUnitBytes ? row_bytes - start : Tl::kUnitBytes;
      const uint8_t* p = row + start;
      const uint8_t* base = reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t{15});
      const int pieces = static_cast<int>((p - base) + len + 15) >> 4;
      if (base + 16 * pieces <= w_end) {
        for (int ch = half; ch < pieces; ch += 2) cp_async_16(dst + 16 * ch, base + 16 * ch, 16);
      } else {  // the tensor's last unit: never read past its last byte
        for (int ch = half; ch < pieces; ch += 2) {
          const uint8_t* src = base + 16 * ch;
          if (w_end - src >= 16) {
            cp_async_16(dst + 16 * ch, src, 16);
          } else {
            for (int i = 0; i < 16; ++i) dst[16 * ch + i] = src + i < w_end ? src[i] : uint8_t{0};
          }
        }
      }
    }
  }
};

// A warp's pipeline over its units [u_begin, u_end) with a ring of kStages slots.
// stage(u, slot) issues unit u's copies and commits them as one cp.async group; compute(u, slot,
// full) runs once they have landed, full = std::true_type unless the unit is the short last one.
// stage_ahead fills the first kStages - 1 slots (callers may do other work before stream_units).
template <int kStages, class Stage>
__device__ __forceinline__ void stage_ahead(int u_begin, int u_end, Stage&& stage) {
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (u_begin + i < u_end)
      stage(u_begin + i, i);
    else
      cp_async_commit();  // empty groups keep the wait counts uniform
  }
}

template <int kStages, int kUnitElems, class Stage, class Compute>
__device__ __forceinline__ void stream_units(int u_begin, int u_end, int64_t k, Stage&& stage, Compute&& compute) {
  for (int u = u_begin; u < u_end; ++u) {
    const int i = u - u_begin;
    if (u + kStages - 1 < u_end)
      stage(u + kStages - 1, (i + kStages - 1) % kStages);
    else
      cp_async_commit();
    cp_async_wait<kStages - 1>();
    __syncwarp();
    if (static_cast<int64_t>(u + 1) * kUnitElems <= k)
      compute(u, i % kStages, std::true_type{});
    else
      compute(u, i % kStages, std::false_type{});
    __syncwarp();  // the slot is refilled next iteration
  }
  cp_async_wait<0>();
}

// Where row `row` of unit u starts inside a stage that holds it at `row_in_stage`.
template <class Tl>
__device__ __forceinline__ const uint8_t* staged_row(const MmvqArgs& a, const uint8_t* stage, int row_in_stage,
                                                     int64_t row, int u) {
  const int64_t unit_start = static_cast<int64_t>(u) * Tl::kUnitBytes;
  return stage + row_in_stage * Tl::kSpanBytes +
         (reinterpret_cast<uintptr_t>(a.w + row * a.w_row_stride + unit_start) & 15);
}

// Eight activations x[k .. k + 8) as bf16 pairs (zeros for a token row past M).
template <class Act>
__device__ __forceinline__ void load_activations(const Act* p, bool valid, uint32_t (&b)[4]);

template <>
__device__ __forceinline__ void load_activations<__nv_bfloat16>(const __nv_bfloat16* p, bool valid, uint32_t (&b)[4]) {
  const uint4 v = valid ? *reinterpret_cast<const uint4*>(p) : make_uint4(0, 0, 0, 0);
  b[0] = v.x, b[1] = v.y, b[2] = v.z, b[3] = v.w;
}

template <>
__device__ __forceinline__ void load_activations<float>(const float* p, bool valid, uint32_t (&b)[4]) {
  const float4 lo = valid ? reinterpret_cast<const float4*>(p)[0] : make_float4(0, 0, 0, 0);
  const float4 hi = valid ? reinterpret_cast<const float4*>(p)[1] : make_float4(0, 0, 0, 0);
  b[0] = bf162_bits(__floats2bfloat162_rn(lo.x, lo.y));
  b[1] = bf162_bits(__floats2bfloat162_rn(lo.z, lo.w));
  b[2] = bf162_bits(__floats2bfloat162_rn(hi.x, hi.y));
  b[3] = bf162_bits(__floats2bfloat162_rn(hi.z, hi.w));
}

template <>
__device__ __forceinline__ void load_activations<__half>(const __half* p, bool valid, uint32_t (&b)[4]) {
  const uint4 v = valid ? *reinterpret_cast<const uint4*>(p) : make_uint4(0, 0, 0, 0);
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
    b[i] = bf162_bits(__floats2bfloat162_rn(f.x, f.y));
  }
}

template <class Out>
__device__ __forceinline__ Out from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}

// Sums the warps' mma accumulators (the m16n8 C fragment layout) in a fixed order and writes y.
// `partial` holds (warps of the block) * kTiles * 128 floats and may alias the staging (the
// caller has synchronized the block after the last read of it).
template <int kTiles, class Act>
__device__ __forceinline__ void reduce_and_store(const MmvqArgs& a, float* partial, const float (&acc)[kTiles][4],
                                                 int64_t row0, int warp, int lane) {
  const int warps = static_cast<int>(blockDim.x >> 5);
#pragma unroll
  for (int nt = 0; nt < kTiles; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) partial[((warp * kTiles + nt) * 4 + c) * 32 + lane] = acc[nt][c];
  __syncthreads();
  Act* const y = static_cast<Act*>(a.y);
  for (int e = threadIdx.x; e < kTiles * 4 * 32; e += static_cast<int>(blockDim.x)) {
    float sum = 0.0f;
    for (int w = 0; w < warps; ++w) sum += partial[w * kTiles * 128 + e];
    const int nt = e >> 7, c = (e >> 5) & 3, ln = e & 31;
    const int64_t row = row0 + (ln >> 2) + (c >= 2 ? 8 : 0);
    const int token = nt * 8 + 2 * (ln & 3) + (c & 1);
    if (row < a.n && token < a.m) y[token * a.y_row_stride + row] = from_float<Act>(sum);
  }
}

template <class Traits, int kTiles, class Act>
__global__ void __launch_bounds__(256, 2) mmvq_kernel(MmvqArgs a) {
  using Tl = MmvqTiling<Traits>;
  extern __shared__ __align__(16) uint8_t smem[];
  const Codebooks cb = shared_codebooks<Traits::kCodebook>(smem);
  uint8_t* const staging = smem + Tl::kCodebookBytes;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * Tl::kRows;
  const int64_t row_bytes = a.k / Traits::kBlockElems * Traits::kBlockBytes;
  const int units = static_cast<int>((a.k + Tl::kUnitElems - 1) / Tl::kUnitElems);
  const int u_begin = warp * units / Tl::kWarps;
  const int u_end = (warp + 1) * units / Tl::kWarps;
  uint8_t* const ring = staging + warp * Tl::kWarpBytes;
  const Act* const x = static_cast<const Act*>(a.x);
  __syncthreads();  // codebook in shared memory

  const RowStager<Tl> stager(a, row0, row_bytes, lane);
  auto stage = [&](int u, int slot) { stager.stage(u, ring + slot * Tl::kStageBytes); };

  float acc[kTiles][4] = {};
  const int64_t row_lo = row0 + g, row_hi = row0 + g + 8;

  // Decodes and multiplies sub-blocks [0, subs) of unit u. With kFull (every unit but a short
  // last one of a 32-weight-block type) the eight sub-blocks unroll without bounds checks, so the
  // compiler interleaves their loads, decodes and MMAs.
  auto compute_unit = [&](int u, int slot, auto full) {
    constexpr bool kFull = decltype(full)::value;
    const uint8_t* st = ring + slot * Tl::kStageBytes;
    const uint8_t* lo = staged_row<Tl>(a, st, g, row_lo, u);
    const uint8_t* hi = staged_row<Tl>(a, st, g + 8, row_hi, u);
    const int64_t k0 = static_cast<int64_t>(u) * Tl::kUnitElems;
    const int subs = kFull ? 8 : static_cast<int>((a.k - k0) / 32);
    uint32_t b[8][kTiles][4];
    auto load_sub = [&](int s, uint32_t (&dst)[kTiles][4]) {
#pragma unroll
      for (int nt = 0; nt < kTiles; ++nt) {
        const int token = nt * 8 + g;
        const bool valid = token < a.m && (kFull || s < subs);
        load_activations<Act>(x + token * a.x_row_stride + k0 + s * 32 + 8 * t, valid, dst[nt]);
      }
    };
#pragma unroll
    for (int s = 0; s < 8; ++s) load_sub(s, b[s]);  // all of the unit's activations: 8 loads in flight
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      if (!kFull && s >= subs) break;
      const int block = Tl::kBlocksPerUnit == 1 ? 0 : s;
      const int group = Tl::kBlocksPerUnit == 1 ? s * 4 + t : t;
      uint8_t scale_lo = 0, scale_hi = 0;
      if constexpr (Traits::kSplitScales) {
        const int64_t sb = k0 / 32 + s;
        scale_lo = row_lo < a.n ? a.scales[row_lo * a.scale_row_stride + sb] : uint8_t{0};
        scale_hi = row_hi < a.n ? a.scales[row_hi * a.scale_row_stride + sb] : uint8_t{0};
      }
      uint32_t wlo[4], whi[4];
      render_bf16(Traits::decode_group(BlockRef{lo + block * Traits::kBlockBytes, scale_lo}, group, cb), wlo);
      render_bf16(Traits::decode_group(BlockRef{hi + block * Traits::kBlockBytes, scale_hi}, group, cb), whi);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const uint32_t frag[4] = {wlo[2 * j], whi[2 * j], wlo[2 * j + 1], whi[2 * j + 1]};
#pragma unroll
        for (int nt = 0; nt < kTiles; ++nt) mma_bf16_m16n8k16(acc[nt], frag, b[s][nt][2 * j], b[s][nt][2 * j + 1]);
      }
    }
  };

  stage_ahead<Tl::kStages>(u_begin, u_end, stage);
  stream_units<Tl::kStages, Tl::kUnitElems>(u_begin, u_end, a.k, stage, compute_unit);
  __syncthreads();  // staging is reused for the cross-warp sum

  reduce_and_store<kTiles, Act>(a, reinterpret_cast<float*>(staging), acc, row0, warp, lane);
}

void configure_shared_memory(const void* kernel, int bytes);

template <class Traits, int kTiles, class Act>
void launch_mmvq_tiles(const MmvqArgs& a, cudaStream_t stream) {
  using Tl = MmvqTiling<Traits>;
  constexpr int kSmem = Tl::smem_bytes(kTiles);
  auto* kernel = &mmvq_kernel<Traits, kTiles, Act>;
  configure_shared_memory(reinterpret_cast<const void*>(kernel), kSmem);
  const unsigned blocks = static_cast<unsigned>((a.n + Tl::kRows - 1) / Tl::kRows);
  kernel<<<blocks, Tl::kThreads, kSmem, stream>>>(a);
  check_launch("mmvq");
}

}  // namespace lowbit::cuda_detail
