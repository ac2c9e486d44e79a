// MMVQ of a single token on dp4a: each thread owns whole 32-weight sub-blocks.
//
// At M = 1 the tensor-core MMVQ (mmvq_int8_kernel.cuh) spends most of its instructions moving
// weights through shared memory and filling mma columns that one token leaves empty; the decode
// is the only work one token needs. Here a block owns kRows rows over the whole K and thread i of
// the block takes sub-blocks i, i + T, i + 2T, ... (T threads) of each of its rows: it decodes
// the sub-block's four int8 groups straight from global memory with the format's decode_i8
// (every weight byte is read by one thread; a warp's loads cover a contiguous run of the row),
// multiplies them with dp4a against the activation codes of the int8 prologue (the quantization
// and I8Order of the tensor-core kernel), and scales the sub-block's int32 sum once (twice for
// formats with 16-weight scales). A sub-block's activations are loaded once for the kRows rows.
// The block then sums its threads' kRows partial sums in a fixed order.
//
// kRows = 4 at 64 registers was the best of 2, 4, 8 and 16 rows at 32 to 128 registers
// (benchmarks/NOTES.md, "dp4a lanes at M = 1").
#pragma once

#include "cuda/mmvq_kernel.cuh"

namespace lowbit::cuda_detail {

// Whether M = 1 runs here rather than on the tensor-core kernel: every int8 format except IQ3_S,
// whose decode reads four scattered parts of its block (qs, qh, signs, scales) in small loads
// that the tensor-core kernel takes from shared memory: 23.9 us here against 21.0 there
// (N = 4096, K = 14336, H200; every other I-quant is 0.5 to 3.9 us faster here).
template <class Traits>
inline constexpr bool kLanesServeOneToken = Traits::kCodebook != Codebook::kIq3s;

template <class Traits>
struct MmvqLaneTiling {
  static_assert(Traits::kI8ScaleElems == 32 || Traits::kI8Order == I8Order::kContiguous,
                "16-weight scales: groups 0, 1 of a sub-block are its first 16 weights");
  static constexpr int kRows = 4;
  static constexpr int kMaxWarps = 8;
  static constexpr int kSubsPerBlock = Traits::kBlockElems / 32;
  static constexpr int kScalesPerSub = 32 / Traits::kI8ScaleElems;  // 1, or 2 (16-weight scales)
  static constexpr int kTableBytes = kInt8TableBytes<Traits>;       // whole 16-byte words
  static constexpr int smem_bytes(int warps) { return kTableBytes + warps * kRows * 4; }
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

template <class Traits, class Act>
__global__ void __launch_bounds__(32 * MmvqLaneTiling<Traits>::kMaxWarps, 4) mmvq_lane_kernel(MmvqArgs a) {
  using Tl = MmvqLaneTiling<Traits>;
  extern __shared__ __align__(16) uint8_t smem[];
  float* const partial = reinterpret_cast<float*>(smem + Tl::kTableBytes);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int threads = static_cast<int>(blockDim.x);
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * Tl::kRows;
  const int subs = static_cast<int>(a.k / 32);
  // rows past N (the last block only) read row 0 and are never stored
  const uint8_t* rows[Tl::kRows];
#pragma unroll
  for (int r = 0; r < Tl::kRows; ++r) rows[r] = a.w + (row0 + r < a.n ? row0 + r : 0) * a.w_row_stride;
  // the first round's lines start their way into L2 while the block builds its table and the
  // prologue kernel finishes
  if (static_cast<int>(threadIdx.x) < subs) {
    const int j = threadIdx.x;
    const int64_t at =
        j / Tl::kSubsPerBlock * Traits::kBlockBytes + j % Tl::kSubsPerBlock * Traits::kBlockBytes / Tl::kSubsPerBlock;
#pragma unroll
    for (int r = 0; r < Tl::kRows; ++r) prefetch_l2(rows[r] + at);
  }
  const Codebooks cb = int8_codebooks<Traits>(smem);
  __syncthreads();
  pdl_wait_for_primary();

  float acc[Tl::kRows] = {};
  for (int j = threadIdx.x; j < subs; j += threads) {
    // the sub-block's activation codes (words 2t, 2t + 1: group t) and scale
    const uint4* src = reinterpret_cast<const uint4*>(a.xq + 32 * static_cast<int64_t>(j));
    const uint4 lo = src[0], hi = src[1];
    const uint32_t xq[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    const float xs = a.xs[8 * j];
    const int block = j / Tl::kSubsPerBlock, sub = j % Tl::kSubsPerBlock;
#pragma unroll
    for (int r = 0; r < Tl::kRows; ++r) {
      uint8_t split = 0;
      if constexpr (Traits::kSplitScales) split = a.scales[(row0 + r < a.n ? row0 + r : 0) * a.scale_row_stride + j];
      const BlockRef b{rows[r] + static_cast<int64_t>(block) * Traits::kBlockBytes, split};
      int sum[Tl::kScalesPerSub] = {};
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const Int8Group q = Traits::decode_i8(b, 4 * sub + t, cb);
        const int h = t * Tl::kScalesPerSub / 4;  // 16-weight scales: groups 0, 1 | 2, 3
        sum[h] = dp4a(q.q[1], xq[2 * t + 1], dp4a(q.q[0], xq[2 * t], sum[h]));
      }
#pragma unroll
      for (int h = 0; h < Tl::kScalesPerSub; ++h)
        acc[r] = fmaf(static_cast<float>(sum[h]), Traits::scale_i8(b, Tl::kScalesPerSub * sub + h) * xs, acc[r]);
    }
  }

  int index;
  const float s = warp_sum_spread(acc, lane, index);
  if (lane < Tl::kRows) partial[warp * Tl::kRows + index] = s;  // lanes >= kRows repeat these sums
  __syncthreads();
  if (static_cast<int>(threadIdx.x) < Tl::kRows) {
    const int r = threadIdx.x;
    float total = 0.0f;
    for (int w = 0; w < threads / 32; ++w) total += partial[w * Tl::kRows + r];
    if (row0 + r < a.n) static_cast<Act*>(a.y)[row0 + r] = from_float<Act>(total);
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
