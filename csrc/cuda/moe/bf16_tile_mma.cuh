// The math core of a tiled bf16 GEMM on tensor cores (mma.sync m16n8k16, float32 accumulation),
// for kernels that stage both operands in shared memory as bf16: A [TileM][TileK] row-major
// (activations) and B [TileN][TileK] row-major (weight rows, i.e. B^T), rows padded by 8
// elements so that the fragment loads of a warp hit 32 distinct banks. The warps tile the block
// WarpsM x WarpsN; each warp owns a (TileM / WarpsM) x (TileN / WarpsN) piece of C.
// Used by the MoE batched kernel (grouped rows).
#pragma once

#include <cstdint>

#include "cuda/common/ptx.cuh"

namespace lowbit::cuda_detail {

template <int kTileM, int kTileN, int kTileK, int kWarpsM, int kWarpsN>
struct Bf16TileMma {
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kRowElems = kTileK + 8;  // padded row of A and B in shared memory
  static constexpr int kRowWords = kRowElems / 2;
  static constexpr int kWarpM = kTileM / kWarpsM;
  static constexpr int kWarpN = kTileN / kWarpsN;
  static constexpr int kFragsM = kWarpM / 16;
  static constexpr int kFragsN = kWarpN / 8;
  static constexpr int kABytes = kTileM * kRowElems * 2;
  static constexpr int kBBytes = kTileN * kRowElems * 2;
  static constexpr int kCRowFloats = kTileN + 4;
  static constexpr int kCBytes = kTileM * kCRowFloats * 4;
  static_assert(kWarpM % 16 == 0 && kWarpN % 8 == 0 && kTileK % 16 == 0, "whole mma fragments per warp");
  // (kRowWords mod 32) == 4: lanes (group g, thread t) read word 4g + t of their row, all distinct
  static_assert(kRowWords % 32 == 4, "conflict-free fragment loads");

  using Acc = float[kFragsM][kFragsN][4];

  __device__ static void zero(Acc& acc) {
#pragma unroll
    for (int i = 0; i < kFragsM; ++i)
#pragma unroll
      for (int j = 0; j < kFragsN; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;
  }

  // acc += A_tile B_tile^T over the whole kTileK (A and B as 32-bit words: bf16 pairs).
  __device__ static void multiply(const uint32_t* a_words, const uint32_t* b_words, Acc& acc) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int group = lane / 4, thread = lane % 4;
    const int m0 = (warp / kWarpsN) * kWarpM, n0 = (warp % kWarpsN) * kWarpN;
#pragma unroll
    for (int ks = 0; ks < kTileK / 16; ++ks) {
      uint32_t a[kFragsM][4];
#pragma unroll
      for (int i = 0; i < kFragsM; ++i) {
        const uint32_t* top = a_words + (m0 + 16 * i + group) * kRowWords + 8 * ks + thread;
        const uint32_t* bottom = top + 8 * kRowWords;
        a[i][0] = top[0];
        a[i][1] = bottom[0];
        a[i][2] = top[4];
        a[i][3] = bottom[4];
      }
#pragma unroll
      for (int j = 0; j < kFragsN; ++j) {
        const uint32_t* col = b_words + (n0 + 8 * j + group) * kRowWords + 8 * ks + thread;
        const uint32_t b0 = col[0], b1 = col[4];
#pragma unroll
        for (int i = 0; i < kFragsM; ++i) mma_bf16_m16n8k16(acc[i][j], a[i], b0, b1);
      }
    }
  }

  // Writes the block's C tile to shared memory c [kTileM][kCRowFloats] (the caller syncs).
  __device__ static void store(const Acc& acc, float* c) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int group = lane / 4, thread = lane % 4;
    const int m0 = (warp / kWarpsN) * kWarpM, n0 = (warp % kWarpsN) * kWarpN;
#pragma unroll
    for (int i = 0; i < kFragsM; ++i)
#pragma unroll
      for (int j = 0; j < kFragsN; ++j) {
        float* top = c + (m0 + 16 * i + group) * kCRowFloats + n0 + 8 * j + 2 * thread;
        top[0] = acc[i][j][0];
        top[1] = acc[i][j][1];
        top[8 * kCRowFloats] = acc[i][j][2];
        top[8 * kCRowFloats + 1] = acc[i][j][3];
      }
  }
};

}  // namespace lowbit::cuda_detail
