// The weight pipeline the two tensor-core MMVQ kernels share (bf16_kernel.cuh, int8_kernel.cuh):
// each warp streams 256-weight units of its block's 16 rows through a ring of shared-memory
// stages with cp.async (RowStager, stage_ahead, stream_units, staged_row), and the block sums its
// warps' mma accumulators in a fixed order at the end (reduce_and_store).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/common/ptx.cuh"
#include "cuda/common/store_float.cuh"
#include "cuda/mmvq/mmvq_args.h"
#include "cuda/mmvq/mmvq_tiling.h"

namespace lowbit::cuda_detail {

// The 16 weight rows of a tile: rows 0..7 are lo .. lo + 7, rows 8..15 are hi .. hi + 7, and a row
// exists below its half's end. A dense tile is 16 consecutive rows (hi = lo + 8, both ends N); a
// gated MoE tile pairs 8 gate rows with their 8 up rows (hi = lo + n', ends n' and 2n'), so that
// lane (g, t) of the mma holds gate row g and its up row in one C fragment.
struct TileRows {
  int64_t lo, hi, lo_end, hi_end;
  __device__ __forceinline__ static TileRows dense(int64_t row0, int64_t n) { return {row0, row0 + 8, n, n}; }
  __device__ __forceinline__ int64_t row(int r) const { return r < 8 ? lo + r : hi + (r - 8); }
  __device__ __forceinline__ bool exists(int r) const { return r < 8 ? lo + r < lo_end : hi + (r - 8) < hi_end; }
};

// Copies units of a warp's 16 rows into its ring stages with cp.async, 16-byte copies of the
// aligned span around each row's unit (the bytes before or after the unit belong to the tensor:
// neighbouring units or rows). Where the tile's rows all exist, share one alignment (row stride a
// multiple of 16) and their spans end inside the tensor, one copy instruction covers whole spans
// of 2 or 4 rows, so that it touches few cache lines (lanes spread over 16 rows made each copy
// about seven times as many shared-memory wavefronts as a contiguous one). Elsewhere lanes 2r and
// 2r + 1 copy row r's pieces, byte by byte past the tensor's very end; rows past N are zero-filled.
// kSplitRows: the tile's two halves may lie apart (TileRows of a gated tile); without it the tile
// is 16 consecutive rows from rows.lo and the code is that of the dense kernels, whose register
// budget has no room for the gap's arithmetic (their spills grew when it was computed at run time).
template <class Tl, bool kSplitRows = false>
struct RowStager {
  static constexpr int kLanesPerRow = Tl::kChunks <= 8 ? 8 : 16;
  static constexpr int kRowsPerCopy = 32 / kLanesPerRow;
  static constexpr int kCopiesPerRow = (Tl::kChunks + kLanesPerRow - 1) / kLanesPerRow;

  const uint8_t* row;   // this lane's row, nullptr past N
  const uint8_t* tile;  // the tile's first row
  const uint8_t* w_end;
  int64_t row_bytes, stride;
  int64_t hi_gap;    // kSplitRows: bytes rows 8..15 lie further than 16 consecutive rows would
  int64_t lane_src;  // this lane's first piece relative to the aligned span of row 0
  int lane_dst, lane_chunk;
  bool whole_tile;  // all 16 rows exist and share one alignment
  int r, half;

  __device__ __forceinline__ RowStager(const MmvqArgs& a, int64_t row0, int64_t row_bytes_, int lane)
      : RowStager(a, TileRows::dense(row0, a.n), row_bytes_, lane) {}

  __device__ __forceinline__ RowStager(const MmvqArgs& a, const TileRows& rows, int64_t row_bytes_, int lane)
      : row_bytes(row_bytes_), stride(a.w_row_stride), r(lane >> 1), half(lane & 1) {
    static_assert(Tl::kRows == 16 && 8 % kRowsPerCopy == 0, "a copy's rows lie in one half of the tile");
    w_end = a.w + (a.n - 1) * a.w_row_stride + row_bytes;
    tile = a.w + rows.lo * a.w_row_stride;
    if constexpr (kSplitRows) {
      row = rows.exists(r) ? a.w + rows.row(r) * a.w_row_stride : nullptr;
      hi_gap = (rows.hi - rows.lo - 8) * a.w_row_stride;
      whole_tile = rows.exists(7) && rows.exists(15) && a.w_row_stride % 16 == 0;
    } else {
      row = rows.lo + r < a.n ? a.w + (rows.lo + r) * a.w_row_stride : nullptr;
      hi_gap = 0;
      whole_tile = rows.lo + Tl::kRows <= a.n && a.w_row_stride % 16 == 0;
    }
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
      if (base + (Tl::kRows - 1) * stride + hi_gap + Tl::kSpanBytes <= w_end) {
        const uint8_t* src = base + lane_src;
        uint8_t* dst = stage_base + lane_dst;
#pragma unroll
        for (int i = 0; i < Tl::kRows / kRowsPerCopy; ++i)
#pragma unroll
          for (int j = 0; j < kCopiesPerRow; ++j)
            if (lane_chunk + j * kLanesPerRow < Tl::kChunks)
              cp_async_16(
                  dst + (i * kRowsPerCopy) * Tl::kSpanBytes + 16 * j * kLanesPerRow,
                  src + (i * kRowsPerCopy) * stride + (i * kRowsPerCopy >= 8 ? hi_gap : 0) + 16 * j * kLanesPerRow, 16);
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

}  // namespace lowbit::cuda_detail
