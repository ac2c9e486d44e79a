// MMVQ on integer tensor cores: y = x W^T for up to 8 tokens, weights decoded straight to their
// int8 codes (the format's decode_i8).
//
// A prologue kernel quantizes the activations once per call: per token and 32 weights,
// d = amax * (1/127), q = rint(x * (127 / amax)) (ggml's q8_1 precision, without its sum), each
// 32-weight run stored in the format's I8Order so that a lane's eight codes are one 8-byte load.
// The MMVQ kernel has the tiling and weight pipeline of the bf16 MMVQ (bf16_kernel.cuh): a block
// owns 16 rows, its warps split K into 256-weight units, each warp streams its units (weights and
// the quantized activations) through a cp.async ring. Per 32-weight sub-block one mma
// m16n8k32.s8 multiplies 16 rows of int8 weights (lane (g, t) decodes int8 group t of the
// sub-block for rows g and g + 8: its A fragment) with a B operand whose eight columns are
// (scale group, token) pairs: with M tokens (M rounded up to 1, 2, 4 or 8), 8 / M consecutive
// scale groups (32 weights, or 16 where the format scales per 16 weights) share one int32 C
// fragment, each group in its own M columns, because every lane whose column does not belong to
// the current group supplies zeros. The fragment is scaled into float32 (weight scale *
// activation scale) once it holds its 8 / M groups: once per unit at M = 1 instead of once per
// group, and the columns that a single token would leave idle carry the other groups.
//
// Pairs mode (kMode, MmvqPairs in mmvq_args.h: the MoE vector projection) runs the same body
// over routed pairs: a block finds its pair's expert, token and output row (enter_pair, in
// mmvq_pairs.cuh), rebases the arguments to them and then is a one-token dense block.
//
// Cost per 8 weights is a table lookup or two and a few integer operations, against about 35
// instructions for the bf16 render: the bf16 kernel was bound by instruction issue (NOTES.md).
#pragma once

#include <type_traits>

#include "cuda/common/device_codebooks.cuh"
#include "cuda/common/int8_activations.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/mmvq/mmvq_pairs.cuh"
#include "cuda/mmvq/row_pipeline.cuh"

namespace lowbit::cuda_detail {

template <class Traits, class Act, int kMaxTokens, MmvqMode kMode = MmvqMode::kDense>
__global__ void __launch_bounds__(32 * (kMode != MmvqMode::kDense ? MmvqInt8Tiling<Traits, kMaxTokens>::kPairsMaxWarps
                                                                  : MmvqInt8Tiling<Traits, kMaxTokens>::kMaxWarps),
                                  kMode != MmvqMode::kDense ? MmvqInt8Tiling<Traits, kMaxTokens>::kPairsBlocksPerSm : 2)
    mmvq_int8_kernel(std::conditional_t<kMode == MmvqMode::kDense, MmvqArgs, MmvqPairArgs> a) {
  using Tl = MmvqInt8Tiling<Traits, kMaxTokens>;
  constexpr bool kPairs = kMode != MmvqMode::kDense, kGated = kMode == MmvqMode::kGatedPairs;
  static_assert(!kPairs || kMaxTokens == 1, "a pair is one token");
  extern __shared__ __align__(16) uint8_t smem[];
  uint8_t* const staging = smem + Tl::kTableBytes;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  TileRows rows = TileRows::dense(static_cast<int64_t>(blockIdx.x) * Tl::kRows, a.n);
  int x_row = 0;  // the block's first activation row (pairs mode: its pair's token)
  if constexpr (kPairs) {
    // The ids are read before the wait: the kernel before is the activation prologue, which
    // triggers this one only after its own wait, so the router's ids are complete (launch.h).
    if (!enter_pair<kGated>(a, rows, x_row)) return;
  }
  const int64_t row_bytes = a.k / Traits::kBlockElems * Traits::kBlockBytes;
  const int units = static_cast<int>((a.k + Tl::kUnitElems - 1) / Tl::kUnitElems);
  const int warps = static_cast<int>(blockDim.x >> 5);  // K slices, chosen at launch
  const int u_begin = warp * units / warps;
  const int u_end = (warp + 1) * units / warps;
  uint8_t* const ring = staging + warp * Tl::kWarpBytes;

  const RowStager<Tl, kGated> stager(a, rows, row_bytes, lane);
  // A unit's weights, then its activation codes (16-byte pieces of each token's 256) and scales
  // (16 pieces); one cp.async group.
  auto stage_activations = [&](int u, int slot) {
    uint8_t* dst = ring + slot * Tl::kSlotBytes + Tl::kStageBytes;
    const int64_t k0 = static_cast<int64_t>(u) * Tl::kUnitElems;
    const int pieces = static_cast<int>((a.k - k0 < 256 ? a.k - k0 : 256) / 16);  // K: whole 32s
    for (int p = lane; p < (a.m + 1) * 16; p += 32) {
      const int m = p / 16 - 1, piece = p % 16;
      if (m < 0) {  // scales of sub-blocks 8u .., 8 floats each: 2 pieces per sub-block
        if (piece < pieces)
          cp_async_16(dst + Tl::kActBytes + 16 * piece,
                      a.xs + (x_row >> 3) * int8_scale_chunk_floats(a.k) + 8 * (k0 / 32) + 4 * piece, 16);
      } else if (piece < pieces) {
        cp_async_16(dst + m * 256 + 16 * piece, a.xq + (x_row + m) * a.k + k0 + 16 * piece, 16);
      }
    }
  };
  auto stage = [&](int u, int slot) {
    stager.issue(u, ring + slot * Tl::kSlotBytes);
    stage_activations(u, slot);
    cp_async_commit();
  };
  // The first unit's weights fly while the block builds its table and the prologue kernel (a
  // programmatic dependency on sm_90) finishes; its activations follow.
  static_assert(Tl::kStages == 2, "one unit staged ahead");
  if (u_begin < u_end) stager.issue(u_begin, ring);
  const Codebooks cb = int8_codebooks<Traits>(smem);
  pdl_wait_for_primary();
  if (u_begin < u_end) stage_activations(u_begin, 0);
  cp_async_commit();
  __syncthreads();

  // The C fragment's eight columns are (scale group slot, token) pairs, column = slot * M + token
  // (M = kMaxTokens): a fragment sums kSlots consecutive scale groups in int32, each group's
  // products landing in its own columns because every other lane's B is masked to zero. Scaling
  // into float32 then happens once per kSlots groups instead of once per group, and at M = 1 the
  // seven columns that would be idle carry other groups. Lane (g, t) supplies column g: token
  // g % M of the groups in slot g / M.
  constexpr int kGroupsPerSub = 32 / Traits::kI8ScaleElems;  // 1, or 2 for a scale per 16 weights
  constexpr int kGroups = 8 * kGroupsPerSub;                 // scale groups per 256-weight unit
  constexpr int kSlots = 8 / kMaxTokens;                     // groups per fragment
  // Period of the lane's B pattern over groups: its slot and (16-weight scales) its half of the
  // sub-block, lanes t < 2 holding the first 16 weights.
  constexpr int kPeriod = kSlots > kGroupsPerSub ? kSlots : kGroupsPerSub;
  constexpr int kOwnLoads = kGroups / kPeriod;  // 8-byte activation loads per lane and unit
  const int my_slot = g / kMaxTokens, my_token = g % kMaxTokens;
  // all ones where this lane supplies group i's column, else 0
  uint32_t b_mask[kPeriod];
#pragma unroll
  for (int i = 0; i < kPeriod; ++i) {
    const bool mine = i % kSlots == my_slot && my_token < a.m && (kGroupsPerSub == 1 || i % 2 == (t >> 1));
    b_mask[i] = mine ? ~0u : 0u;
  }

  // acc[c]: C fragment element c (rows g, g, g + 8, g + 8; columns 2t, 2t + 1)
  float acc[1][4] = {};
  const int64_t row_lo = rows.row(g), row_hi = rows.row(g + 8);

  auto compute_unit = [&](int u, int slot, auto full) {
    constexpr bool kFull = decltype(full)::value;
    const uint8_t* st = ring + slot * Tl::kSlotBytes;
    const uint8_t* act_q = st + Tl::kStageBytes;                                     // [token][256]
    const float* act_scale = reinterpret_cast<const float*>(act_q + Tl::kActBytes);  // [sub-block][8]
    const uint8_t* lo = staged_row<Tl>(a, st, g, row_lo, u);
    const uint8_t* hi = staged_row<Tl>(a, st, g + 8, row_hi, u);
    const int64_t k0 = static_cast<int64_t>(u) * Tl::kUnitElems;
    const int subs = kFull ? 8 : static_cast<int>((a.k - k0) / 32);
    const int groups = subs * kGroupsPerSub;
    auto block_ref = [&](const uint8_t* row, int64_t n_row, int s) {
      uint8_t split = 0;
      if constexpr (Traits::kSplitScales)
        split = n_row < a.n ? a.scales[n_row * a.scale_row_stride + k0 / 32 + s] : uint8_t{0};
      return BlockRef{row + (Tl::kBlocksPerUnit == 1 ? 0 : s) * Traits::kBlockBytes, split};
    };
    auto weight_scale = [&](const uint8_t* row, int64_t n_row, int q) {
      const int s = q / kGroupsPerSub;
      return Traits::scale_i8(block_ref(row, n_row, s), Tl::kBlocksPerUnit == 1 ? q : 0);
    };
    // This lane's activation codes: token my_token of the sub-blocks of its groups
    uint2 own[kOwnLoads];
#pragma unroll
    for (int i = 0; i < kOwnLoads; ++i) {
      const int q = i * kPeriod + (kSlots >= kGroupsPerSub ? my_slot : 0);
      own[i] = *reinterpret_cast<const uint2*>(act_q + my_token * 256 + 32 * (q / kGroupsPerSub) + 8 * t);
    }
    // Scales the fragment of groups [q_base, q_base + kSlots) into acc and clears it. Lane t's
    // columns 2t, 2t + 1 are slots (2t) / M, (2t + 1) / M and tokens (2t) % M, (2t + 1) % M.
    // Columns of groups past a short unit's end hold zeros; their scales are read at group 0 (a
    // split format's scales past the row's last block lie outside the tensor) and zeroed.
    auto flush = [&](int (&c)[4], int q_base) {
      int q0 = q_base + (2 * t) / kMaxTokens, q1 = q_base + (2 * t + 1) / kMaxTokens;
      const bool past0 = !kFull && q0 >= groups, past1 = !kFull && q1 >= groups;
      if (past0) q0 = 0;
      if (past1) q1 = 0;
      // columns of the scales staged for eight rows: x_row's place in its chunk, then the token
      const int m0 = (x_row & 7) + (2 * t) % kMaxTokens, m1 = (x_row & 7) + (2 * t + 1) % kMaxTokens;
      float x0 = act_scale[(q0 / kGroupsPerSub) * 8 + m0], x1 = act_scale[(q1 / kGroupsPerSub) * 8 + m1];
      float lo0 = weight_scale(lo, row_lo, q0), hi0 = weight_scale(hi, row_hi, q0), lo1 = lo0, hi1 = hi0;
      if constexpr (kMaxTokens == 1) lo1 = weight_scale(lo, row_lo, q1), hi1 = weight_scale(hi, row_hi, q1);
      if (past0) x0 = 0.0f, lo0 = 0.0f, hi0 = 0.0f;
      if (past1) x1 = 0.0f, lo1 = 0.0f, hi1 = 0.0f;
      acc[0][0] = fmaf(static_cast<float>(c[0]), lo0 * x0, acc[0][0]);
      acc[0][1] = fmaf(static_cast<float>(c[1]), lo1 * x1, acc[0][1]);
      acc[0][2] = fmaf(static_cast<float>(c[2]), hi0 * x0, acc[0][2]);
      acc[0][3] = fmaf(static_cast<float>(c[3]), hi1 * x1, acc[0][3]);
      c[0] = c[1] = c[2] = c[3] = 0;
    };

    int c[4] = {0, 0, 0, 0};
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      if (!kFull && s >= subs) break;
      const int group = Tl::kBlocksPerUnit == 1 ? s * 4 + t : t;
      const Int8Group q_lo = Traits::decode_i8(block_ref(lo, row_lo, s), group, cb);
      const Int8Group q_hi = Traits::decode_i8(block_ref(hi, row_hi, s), group, cb);
      const uint32_t frag[4] = {q_lo.q[0], q_hi.q[0], q_lo.q[1], q_hi.q[1]};
#pragma unroll
      for (int h = 0; h < kGroupsPerSub; ++h) {
        const int q = s * kGroupsPerSub + h;
        const uint2 b = own[q / kPeriod];
        const uint32_t m = b_mask[q % kPeriod];
        mma_s8_m16n8k32(c, frag, b.x & m, b.y & m);
        if (q % kSlots == kSlots - 1) flush(c, q - (kSlots - 1));
      }
    }
    if (!kFull && groups % kSlots != 0) flush(c, groups - groups % kSlots);
  };

  stream_units<Tl::kStages, Tl::kUnitElems>(u_begin, u_end, a.k, stage, compute_unit);
  // Back to the C layout of one token per column (lane t: tokens 2t, 2t + 1): columns of the same
  // token sit in lanes t, t ^ (M / 2), ... of the quad (at M = 1 also in both of a lane's columns).
  if constexpr (kMaxTokens == 1) acc[0][0] += acc[0][1], acc[0][2] += acc[0][3], acc[0][1] = acc[0][3] = 0.0f;
#pragma unroll
  for (int offset = 1; offset <= 2; offset *= 2) {
    if (2 * offset < kMaxTokens) continue;
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[0][e] += __shfl_xor_sync(0xFFFFFFFFu, acc[0][e], offset);
  }
  __syncthreads();  // staging is reused for the cross-warp sum
  if constexpr (kPairs) point_at_pair_output<kGated>(a);
  if constexpr (kGated) return reduce_and_store_gated(a, reinterpret_cast<float*>(staging), acc, rows, warp, lane);
  if constexpr (kPairs) {  // the op's dtype (a uniform branch: reduce_and_store synchronizes the block)
    if (a.pairs.out_type == FloatType::BF16)
      return reduce_and_store<1, __nv_bfloat16>(a, reinterpret_cast<float*>(staging), acc, rows.lo, warp, lane);
    if (a.pairs.out_type == FloatType::F16)
      return reduce_and_store<1, __half>(a, reinterpret_cast<float*>(staging), acc, rows.lo, warp, lane);
  }
  reduce_and_store<1, Act>(a, reinterpret_cast<float*>(staging), acc, rows.lo, warp, lane);
}

}  // namespace lowbit::cuda_detail
