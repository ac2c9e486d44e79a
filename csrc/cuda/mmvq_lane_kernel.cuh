// MMVQ of one or two tokens on dp4a: each thread owns whole 32-weight sub-blocks.
//
// With one or two tokens the tensor-core MMVQ (mmvq_int8_kernel.cuh) spends most of its
// instructions moving weights through shared memory and filling mma columns that the tokens leave
// empty; the decode is the only work they need. Here a block works on kRows rows at a time over
// the whole K, and thread i of the block takes sub-blocks i, i + T, i + 2T, ... (T threads) of
// each of those rows: it decodes the sub-block's four int8 groups straight from global memory with
// the format's decode_i8 (every weight byte is read by one thread; a warp's loads cover a
// contiguous run of the row), multiplies them with dp4a against each token's codes from the int8
// prologue (the quantization and I8Order of the tensor-core kernel), and scales the sub-block's
// int32 sums once (twice for formats with 16-weight scales). A sub-block's activations are loaded
// once for the kRows rows. The block then sums its threads' partial sums in a fixed order.
//
// The grid is one wave: block b takes row groups b, b + gridDim.x, ..., so the codebook table is
// built once per block, and the first lines of its next group start into L2 while it works.
// Rows per group and warps per block are chosen per format (lane_shape, measured).
#pragma once

#include "cuda/mmvq_kernel.cuh"

namespace lowbit::cuda_detail {

// How the lane kernel runs a format for `tokens` tokens: rows per group and the most warps per
// block, or rows == 0 where the tensor-core kernel is faster. Measured on the H200 at N = 4096,
// K = 14336 (benchmarks/NOTES.md, "dp4a lanes, one wave"): two rows in blocks of at most four
// warps (K = 14336: two warps, 16 blocks per SM) suit the nibble formats, IQ2_XXS, IQ2_XS,
// IQ3_XXS and Q8_0; four rows in blocks of up to eight warps the IQ1 and IQ2_S grids, whose
// shared-memory tables are then built by fewer blocks, and the formats not measured apart (Q5_0,
// MXFP4_SPLIT). IQ3_S (four scattered parts per sub-block) stays on tensor cores; at two tokens
// so do the IQ3 formats, MXFP4, MXFP4_SPLIT and the legacy types.
struct LaneShape {
  int rows;
  int max_warps;
};

template <class Traits>
constexpr LaneShape lane_shape(int tokens) {
  constexpr QuantType t = Traits::kType;
  constexpr bool nibbles = t == QuantType::IQ4_XS || t == QuantType::IQ4_NL;
  if (tokens == 1) {
    if (t == QuantType::IQ3_S) return {0, 0};
    if (nibbles || t == QuantType::IQ2_XXS || t == QuantType::IQ2_XS || t == QuantType::IQ3_XXS ||
        t == QuantType::MXFP4 || t == QuantType::Q8_0)
      return {2, 4};
    return {4, 8};
  }
  if (tokens == 2) {
    if (nibbles) return {2, 4};
    if (t == QuantType::IQ2_XXS || t == QuantType::IQ2_XS || t == QuantType::IQ2_S || t == QuantType::IQ1_S ||
        t == QuantType::IQ1_M)
      return {4, 8};
  }
  return {0, 0};
}

template <class Traits, int kRowsPerGroup>
struct MmvqLaneTiling {
  static_assert(Traits::kI8ScaleElems == 32 || Traits::kI8Order == I8Order::kContiguous,
                "16-weight scales: groups 0, 1 of a sub-block are its first 16 weights");
  static constexpr int kRows = kRowsPerGroup;  // rows a block works on at a time
  // the launch bound (256 threads at 64 registers), whatever a shape's own warp limit
  static constexpr int kMaxWarps = 8;
  static constexpr int kSubsPerBlock = Traits::kBlockElems / 32;
  static_assert(32 % kSubsPerBlock == 0, "a thread keeps its sub-block of the format block across rounds");
  static constexpr int kScalesPerSub = 32 / Traits::kI8ScaleElems;  // 1, or 2 (16-weight scales)
  static constexpr int kTableBytes = kInt8TableBytes<Traits>;       // whole 16-byte words
  // the table, then two sets of the warps' partial sums (alternate row groups)
  static constexpr int smem_bytes(int warps, int tokens) { return kTableBytes + 2 * warps * kRows * tokens * 4; }
};

__device__ __forceinline__ int dp4a(uint32_t a, uint32_t b, int c) {
  return __dp4a(static_cast<int>(a), static_cast<int>(b), c);
}

// Sums each of the kN values over the warp's 32 lanes. Lanes exchange half of their values at
// each step (the half whose index bit differs from theirs), so kN values cost kN - 1 shuffles
// instead of 5 kN; value `index` ends in the lanes whose low log2(kN) bits spell it, and the last
// steps sum it over the remaining lane bits. Returns this lane's value.
template <int kN>
__device__ __forceinline__ float warp_sum_spread(float (&v)[kN], int lane, int& index) {
  static_assert((kN & (kN - 1)) == 0 && kN <= 32, "a power of two up to 32 values");
  index = 0;
  int bit = 1;
#pragma unroll
  for (int count = kN; count > 1; count /= 2, bit *= 2) {
    const bool upper = lane & bit;
#pragma unroll
    for (int i = 0; i < count / 2; ++i) {
      const float send = upper ? v[i] : v[i + count / 2];
      const float keep = upper ? v[i + count / 2] : v[i];
      v[i] = keep + __shfl_xor_sync(0xFFFFFFFFu, send, bit);
    }
    if (upper) index += count / 2;
  }
  float s = v[0];
#pragma unroll
  for (; bit < 32; bit *= 2) s += __shfl_xor_sync(0xFFFFFFFFu, s, bit);
  return s;
}

// kTokens: 1 or 2 tokens. Launched with M = kTokens; tokens from a.m up would read and store
// nothing (the workspace holds M tokens).
template <class Traits, class Act, int kTokens, int kRows>
__global__ void __launch_bounds__(32 * MmvqLaneTiling<Traits, kRows>::kMaxWarps, 4) mmvq_lane_kernel(MmvqArgs a) {
  using Tl = MmvqLaneTiling<Traits, kRows>;
  constexpr int kSums = kRows * kTokens;  // acc[r * kTokens + m]
  extern __shared__ __align__(16) uint8_t smem[];
  float* const partials = reinterpret_cast<float*>(smem + Tl::kTableBytes);
  const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const unsigned threads = blockDim.x, warps = threads / 32;
  const unsigned subs = static_cast<unsigned>(a.k / 32);
  const int64_t groups = (a.n + kRows - 1) / kRows;
  // This thread's sub-blocks: j = threadIdx.x + i * threads, always sub-block `sub` of a format
  // block (threads is a multiple of 32), the blocks `step_bytes` apart.
  const int sub = static_cast<int>(threadIdx.x % Tl::kSubsPerBlock);
  const int64_t first_byte = threadIdx.x / Tl::kSubsPerBlock * static_cast<int64_t>(Traits::kBlockBytes);
  const int64_t step_bytes = threads / Tl::kSubsPerBlock * static_cast<int64_t>(Traits::kBlockBytes);
  // rows past N (the last group only) read row 0 and are never stored
  auto row_of = [&](int64_t group, int r) {
    const int64_t row = group * kRows + r;
    return row < a.n ? row : int64_t{0};
  };
  auto prefetch_group = [&](int64_t group) {
    if (group < groups && threadIdx.x < subs) {
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        prefetch_l2(a.w + row_of(group, r) * a.w_row_stride + first_byte +
                    sub * (Traits::kBlockBytes / Tl::kSubsPerBlock));
    }
  };
  prefetch_group(blockIdx.x);  // while the block builds its table and the prologue finishes
  const Codebooks cb = int8_codebooks<Traits>(smem);
  __syncthreads();
  pdl_wait_for_primary();

  int parity = 0;
  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x, parity ^= 1) {
    prefetch_group(group + gridDim.x);
    const uint8_t* rows[kRows];
    const uint8_t* split_scales[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      rows[r] = a.w + row_of(group, r) * a.w_row_stride + first_byte;
      if constexpr (Traits::kSplitScales)
        split_scales[r] = a.scales + row_of(group, r) * a.scale_row_stride + threadIdx.x;
    }
    const uint8_t* xq = a.xq + 32 * threadIdx.x;
    const float* xs = a.xs + 8 * threadIdx.x;
    float acc[kSums] = {};
    for (unsigned j = threadIdx.x; j < subs; j += threads) {
      // the sub-block's activation codes (words 2t, 2t + 1: group t) and scale, per token
      uint32_t x[kTokens][8];
      float x_scale[kTokens];
#pragma unroll
      for (int m = 0; m < kTokens; ++m) {
        if (m == 0 || m < a.m) {
          const uint4* src = reinterpret_cast<const uint4*>(xq + m * a.k);
          const uint4 lo = src[0], hi = src[1];
          x[m][0] = lo.x, x[m][1] = lo.y, x[m][2] = lo.z, x[m][3] = lo.w;
          x[m][4] = hi.x, x[m][5] = hi.y, x[m][6] = hi.z, x[m][7] = hi.w;
          x_scale[m] = xs[m];
        } else {
#pragma unroll
          for (int w = 0; w < 8; ++w) x[m][w] = 0;
          x_scale[m] = 0.0f;
        }
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        uint8_t split = 0;
        if constexpr (Traits::kSplitScales) split = *split_scales[r];
        const BlockRef b{rows[r], split};
        int sum[kTokens][Tl::kScalesPerSub] = {};
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          const Int8Group q = Traits::decode_i8(b, 4 * sub + t, cb);
          const int h = t * Tl::kScalesPerSub / 4;  // 16-weight scales: groups 0, 1 | 2, 3
#pragma unroll
          for (int m = 0; m < kTokens; ++m)
            sum[m][h] = dp4a(q.q[1], x[m][2 * t + 1], dp4a(q.q[0], x[m][2 * t], sum[m][h]));
        }
#pragma unroll
        for (int h = 0; h < Tl::kScalesPerSub; ++h) {
          const float ws = Traits::scale_i8(b, Tl::kScalesPerSub * sub + h);
#pragma unroll
          for (int m = 0; m < kTokens; ++m)
            acc[r * kTokens + m] = fmaf(static_cast<float>(sum[m][h]), ws * x_scale[m], acc[r * kTokens + m]);
        }
        rows[r] += step_bytes;
        if constexpr (Traits::kSplitScales) split_scales[r] += threads;
      }
      xq += 32 * threads;
      xs += 8 * threads;
    }

    // partial sums alternate between two sets, so that one barrier per group orders this group's
    // writes after the reads of the group before
    float* const partial = partials + parity * warps * kSums;
    int index;
    const float s = warp_sum_spread(acc, static_cast<int>(lane), index);
    if (lane < kSums) partial[warp * kSums + index] = s;  // lanes >= kSums repeat these sums
    __syncthreads();
    if (threadIdx.x < kSums) {
      const int r = threadIdx.x / kTokens, m = threadIdx.x % kTokens;
      float total = 0.0f;
      for (unsigned w = 0; w < warps; ++w) total += partial[w * kSums + threadIdx.x];
      const int64_t row = group * kRows + r;
      if (row < a.n && m < a.m) static_cast<Act*>(a.y)[m * a.y_row_stride + row] = from_float<Act>(total);
    }
  }
}

// Warps per block for K = 32 * subs: the fewest thread slots that cover the sub-blocks (threads
// of the last round idle), and among equals the most warps (fewer rounds per thread).
inline int lane_warps_for(int64_t subs, int max_warps) {
  int best = 1;
  int64_t best_slots = (subs + 31) / 32 * 32;
  for (int w = 2; w <= max_warps; ++w) {
    const int64_t per_round = 32 * w, slots = (subs + per_round - 1) / per_round * per_round;
    if (slots <= best_slots) best = w, best_slots = slots;
  }
  return best;
}

}  // namespace lowbit::cuda_detail
