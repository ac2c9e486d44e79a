// MMQ on Hopper: y = x W^T for many tokens on the quantized weight, never materializing it.
//
// A block owns 128 weight rows (two warpgroups of 64) and a tile of T tokens (16 .. 128) over a
// range of K (the whole K, or one split of it). K advances in units of 256 weights through a ring
// of shared-memory stages: the raw GGUF bytes of the unit's 128 rows, copied with cp.async (each
// warp its own 16 rows as the bf16 MMVQ does: RowStager), and the activations of the T tokens, bf16
// in the 128-byte swizzle that wgmma's B descriptor reads (dense bf16: tensor copies issued by one
// thread, a box per 64-weight slice; grouped and int8: cp.async by the whole block, which gathers
// the tile's rows).
// Each warp decodes its 16 rows with the format's decode primitive straight into the A fragment
// of a register-sourced wgmma (m64 nT k16, float32 accumulate): lane (g, t) decodes eight weights
// of each 32-weight span for rows g and g + 8 (weights [8t, 8t + 8), or for the nibble formats
// the pairs of code bytes [4t, 4t + 4)), which is the fragment once the activations are stored in
// the matching K order (mmq_k_order.h). A prologue kernel writes that order once per call, so the
// main loop moves activations with plain 16-byte copies. Decode of one 64-weight slice overlaps the
// wgmma of the slice before, across units too. With a split K, blocks write float32 partial sums
// that a second kernel adds in a fixed order (deterministic).
//
// The int8 path (MmqConfig::int8, types with a 32-weight int8 form): the prologue quantizes the
// activations per token and 32 weights as the int8 MMVQ does; each warp decodes its rows to their
// int8 codes (decode_i8: one or two lookups per eight weights instead of the bf16 render) into the
// A fragment of a k32 int8 wgmma per 32-weight run, and scales each run's int32 result into the
// float32 sums with the row's and the token's scales.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cuda/common/device_codebooks.cuh"
#include "cuda/common/dropped_rows.cuh"
#include "cuda/common/int8_activations.cuh"
#include "cuda/common/launch.h"
#include "cuda/common/ptx.cuh"
#include "cuda/common/render_bf16.cuh"
#include "cuda/common/tensor_map.h"
#include "cuda/mmq/grid_bf16.cuh"
#include "cuda/mmq/mmq_k_order.h"
#include "cuda/mmq/mmq_launch.h"
#include "cuda/mmq/mmq_tiling.h"
#include "cuda/mmq/nibble_pairs_bf16.cuh"
#include "cuda/mmq/wgmma.cuh"
#include "cuda/mmvq/row_pipeline.cuh"
#include "lowbit/error.h"
#include "lowbit/formats/all.h"

namespace lowbit::cuda_detail {

// The grouped MoE prologue's zeros (MmqArgs::zero_slots) on activation row r: its pairs
// [first, last), whose first 32 slots the prologue's threads read before their activation loads
// (lane_pair_dropped) and whose dropped rows they zero after their stores (zero_dropped_rows,
// thread t of `threads` on the row). A row is whole warps (k_pad / 8 threads, k_pad a multiple of
// 256), as the ballot there needs. Here the zeros cost no launch of their own (a memset
// of the whole output was 1.3 us of moe_proj at 128 tokens: benchmarks/NOTES.md).
struct RowPairs {
  int64_t first, last;
};
__device__ __forceinline__ RowPairs row_pairs(const MmqArgs& a, int64_t r) {
  const int64_t first = r * a.zero_divisor;
  return {first, first + a.zero_divisor < a.zero_pairs ? first + a.zero_divisor : a.zero_pairs};
}
__device__ __forceinline__ bool row_lane_dropped(const MmqArgs& a, int64_t r) {
  if (a.zero_slots == nullptr) return false;
  const RowPairs rp = row_pairs(a, r);
  return lane_pair_dropped(a.zero_slots, rp.first, rp.last);
}
__device__ __forceinline__ void zero_row_pairs(const MmqArgs& a, int64_t r, bool lane_dropped, int64_t t,
                                               int64_t threads) {
  if (a.zero_slots == nullptr) return;
  const RowPairs rp = row_pairs(a, r);
  zero_dropped_rows(lane_dropped, a.zero_slots, rp.first, rp.last, a.y, a.y_type, a.y_row_stride, a.n, t, threads);
}

// The prologues' grid: x over a row's threads (whole warps: a multiple of 32 per row), y over the
// rows (each block stepping gridDim.y rows on past 65535), so that no thread divides by the row
// length (a 64-bit division was most of a thread's instructions, benchmarks/NOTES.md).
inline dim3 mmq_prologue_grid(int64_t rows, int64_t threads_per_row) {
  const int64_t y = rows < 65535 ? rows : 65535;
  return dim3(static_cast<unsigned>((threads_per_row + 255) / 256), static_cast<unsigned>(y > 0 ? y : 1));
}

// xp[r, j] = bf16(x[r, span(j) * 32 + mmq_span_source<kNibblePairs>(j mod 32)]), zero past K; eight
// outputs per thread (one 16-byte store), each an element load (neighbours in x in pairs, or 16
// apart in the nibble formats' pair order; x and its row stride carry no alignment promise).
template <class Act, bool kNibblePairs>
__global__ void __launch_bounds__(256) mmq_permute_activations(MmqArgs a, int64_t k_pad) {
  // A programmatic launch: the blocks start while the kernel before drains (the routing, or the
  // last call's tiles, which still read the workspace) and wait for it here; the tiles kernel
  // after it may start its blocks now, as it waits for this grid before any read.
  pdl_wait_for_primary();
  pdl_launch_dependents();
  const int64_t octets = k_pad / 8;  // threads per row: a multiple of 32
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= octets) return;  // whole warps
  const int64_t j0 = 8 * c;
  const int64_t span = j0 & ~int64_t{31};
  const int q = static_cast<int>(j0 & 31);
  for (int64_t r = blockIdx.y; r < a.m; r += gridDim.y) {
    const bool lane_dropped = row_lane_dropped(a, r);
    const Act* const x = static_cast<const Act*>(a.x) + r * a.x_row_stride;
    uint32_t out[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t src0 = span + mmq_span_source<kNibblePairs>(q + 2 * i);
      const int64_t src1 = span + mmq_span_source<kNibblePairs>(q + 2 * i + 1);
      // float, __nv_bfloat16 and __half all convert exactly
      const float v0 = src0 < a.k ? static_cast<float>(x[src0]) : 0.0f;
      const float v1 = src1 < a.k ? static_cast<float>(x[src1]) : 0.0f;
      const __nv_bfloat162 pair = __floats2bfloat162_rn(v0, v1);
      out[i] = reinterpret_cast<const uint32_t&>(pair);
    }
    reinterpret_cast<uint4*>(a.workspace)[(r * k_pad + j0) / 8] = make_uint4(out[0], out[1], out[2], out[3]);
    zero_row_pairs(a, r, lane_dropped, c, octets);
  }
}

// Keeps the compiler from moving accumulator registers while wgmma owns them.
template <int N>
__device__ __forceinline__ void fence_accumulators(float (&acc)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(acc[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_accumulators(int (&acc)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(acc[i])::"memory");
}

// The int8 prologue: thread (token, group) quantizes int8 group `group` (eight weights of the
// format's I8Order) of a token as the int8 MMVQ does (quantize8) and stores its codes where the
// A fragment's K order puts them (word t and word 4 + t of its 32-weight run, mmq_tiling.h), the
// run's scale after the unit's codes. Zeros past K.
template <class Act, I8Order kOrder>
__global__ void __launch_bounds__(256) mmq_quantize_activations(MmqArgs a, int64_t k_pad) {
  pdl_wait_for_primary();  // as in mmq_permute_activations
  pdl_launch_dependents();
  const int64_t groups = k_pad / 8;  // threads per row: a multiple of 32, so quads never straddle rows
  const int64_t group = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (group >= groups) return;  // whole warps
  const int run = static_cast<int>((group >> 2) & 7), t = static_cast<int>(group & 3);
  for (int64_t token = blockIdx.y; token < a.m; token += gridDim.y) {
    const bool lane_dropped = row_lane_dropped(a, token);
    float v[8] = {};
    if (group * 8 < a.k) {
      // element loads: the C++ API promises no alignment of x or of its row stride
      const Act* src = static_cast<const Act*>(a.x) + token * a.x_row_stride + 32 * (group >> 2);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = static_cast<float>(src[i8_element(kOrder, t, j)]);
    }
    uint32_t q[2];
    const float d = quantize8(v, q);  // every lane: the quad's amax comes by shuffles
    uint8_t* const unit = a.workspace + (token * (k_pad / kMmqUnitElems) + group / 32) * kMmqInt8UnitBytes;
    uint32_t* const codes = reinterpret_cast<uint32_t*>(unit + 32 * run);
    codes[t] = q[0];
    codes[4 + t] = q[1];
    if (t == 0) reinterpret_cast<float*>(unit + kMmqUnitElems)[run] = d;
    zero_row_pairs(a, token, lane_dropped, group, groups);
  }
}

// What a block's mainloop reads, apart from the tiling: the weight rows (one expert's, for the
// grouped mode) and which 16 of them this warp takes (TileRows: 16 consecutive rows, or a gated
// tile's 8 gate rows and their 8 up rows). `act_row(r)` gives the row of the permuted activations
// that token-tile row r reads, or -1 for zeros.
struct MmqTileSource {
  MmvqArgs w;     // w, strides, scales of the rows; n = rows of the tensor; k
  TileRows rows;  // this warp's rows
};

// The MMQ mainloop (module comment): accumulates this warp's 16 rows x kTokens tokens over the
// units [u_begin, u_end) into acc, in the wgmma accumulator layout (wgmma.cuh). `smem` is the
// 1024-aligned dynamic shared memory of MmqTiling<Traits, kTokens, kInt8, kGrouped, kExactSpans>
// (codebook, then the ring); xp the prologue's activations (bf16 [M][k_pad], or int8 units:
// mmq_tiling.h). Every thread of the block calls it (it synchronizes the block).
//
// kInt8: per 32-weight run one k32 int8 wgmma of the run's codes into an int32 fragment, which is
// then scaled into acc (weight scale of the row times activation scale of the token); the next
// run is decoded while the tensor cores take this one.
//
// Tl::kTensorActs (the dense bf16 tiles): the activations come from the tensor map `act_map` of xp
// (mmq_activation_map), tokens act_row0.. of the tile, instead of act_row's gather.
template <class Traits, int kTokens, bool kSplitRows, bool kInt8, bool kGrouped, bool kExactSpans = false, class ActRow>
__device__ __forceinline__ void mmq_mainloop(const MmqTileSource& src, ActRow&& act_row, const uint8_t* xp,
                                             int64_t k_pad, int u_begin, int u_end, uint8_t* smem,
                                             float (&acc)[kTokens / 2], const CUtensorMap* act_map = nullptr,
                                             int act_row0 = 0) {
  using Tl = MmqTiling<Traits, kTokens, kInt8, kGrouped, kExactSpans>;
  constexpr bool kTensorActs = Tl::kTensorActs;
  using Rows = typename Tl::Rows;
  const Codebooks cb = [&] {
    if constexpr (kInt8)
      return int8_codebooks<Traits>(smem);
    else if constexpr (Tl::kGridTables)
      return Codebooks{};  // the decode reads the bf16 copy below
    else
      return shared_codebooks<Traits::kCodebook>(smem);
  }();
  uint8_t* const ring = smem + Tl::kCodebookBytes;
  // tensor copies: the stages' barriers after the ring, armed by thread 0 (one arrival per fill)
  [[maybe_unused]] uint64_t* const act_bars = reinterpret_cast<uint64_t*>(ring + Tl::kStages * Tl::kStageBytes);
  if constexpr (kTensorActs) {
    if (threadIdx.x == 0) {
#pragma unroll
      for (int i = 0; i < Tl::kStages; ++i) mbarrier_init(act_bars + i, 1);
      fence_mbarrier_init();
    }
    __syncthreads();  // initialized before any thread waits on them, ahead of the loop's first block barrier
  }
  const uint32_t* pair_table = nullptr;  // visible after the first unit's barrier, as the codebook
  // one table: built here; a table per lane (32 KB): after the first units' copies
  // are issued, so that their loads run while it is built
  auto build_pair_table = [&] {
    pair_table = build_nibble_pair_table<Tl::kPairCopies, Tl::kThreads>(smem + codebook_bytes(Traits::kCodebook));
  };
  if constexpr (Tl::kNibblePairs && Tl::kPairCopies == 1) build_pair_table();
  const uint32_t* grid_bf16 = nullptr;  // likewise
  if constexpr (Tl::kGridTables) grid_bf16 = build_grid_bf16<Traits>(smem);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const MmvqArgs& wa = src.w;
  const int64_t k = wa.k;
  const int64_t row_bytes = k / Traits::kBlockElems * Traits::kBlockBytes;
  const RowStager<Rows, kSplitRows> stager(wa, src.rows, row_bytes, lane);

  // Token rows r of the tile, 128-byte pieces per slice: piece (r, c) of 16 bytes lands in slice
  // c / 8 at row r, its 16-byte column c % 8 swizzled by r % 8. Warp w of W (8 or 16) copies rows
  // w + W i (i < T / W): the row's swizzle is the warp's, so a lane's destinations differ by a
  // constant per i and only the source row is computed per copy (a loop over (r, c) cost about a
  // fifth of the kernel's instructions at 128 tokens, ncu 2026-12-01).
  // bf16: a row's unit is 512 bytes, lane c copies piece c. int8: 256 bytes of codes (lanes 0..15)
  // and 32 bytes of scales (lanes 16, 17, into the stage's [T][8] float block).
  constexpr int kWarps = Tl::kWarps;
  static_assert(kWarps % 8 == 0 && kTokens % kWarps == 0, "whole token rows per warp, each row's swizzle the warp's");
  static_assert(!kInt8 || kWarps == 8, "the int8 path's scale pieces: eight warps");
  constexpr int kPieces = kInt8 ? 18 : 32;
  const bool copies = lane < kPieces;
  const bool scale_piece = kInt8 && lane >= 16;
  // warp & 7 alone costs the eight-warp tiles instructions: the compiler does not know warp < 8
  const int warp_swizzle = kWarps == 8 ? warp : (warp & 7);
  const int act_dst0 = scale_piece ? Tl::kActBytes + warp * 32 + (lane - 16) * 16
                                   : (lane >> 3) * Tl::kSliceBytes + warp * 128 + (((lane & 7) ^ warp_swizzle) << 4);
  const int act_dst_step = scale_piece ? 8 * 32 : 128 * kWarps;  // per i: W rows down
  const int64_t x_row_bytes = kInt8 ? (k_pad / kMmqUnitElems) * kMmqInt8UnitBytes : k_pad * 2;
  const int64_t x_unit_bytes = kInt8 ? kMmqInt8UnitBytes : kMmqUnitElems * 2;
  auto stage = [&](int u, int slot) {
    uint8_t* const st = ring + slot * Tl::kStageBytes;
    if constexpr (kTensorActs) {
      // rows past the tokens (and K past the activations) arrive as zeros, counted in the bytes
      if (threadIdx.x == 0) {
        mbarrier_arrive_expect_tx(act_bars + slot, Tl::kActBytes);
#pragma unroll
        for (int s = 0; s < Tl::kSlices; ++s)
          tensor_copy_2d_to_shared(st + s * Tl::kSliceBytes, act_map, u * kMmqUnitElems + 64 * s, act_row0,
                                   act_bars + slot);
      }
    } else {
      uint8_t* const act_dst = st + act_dst0;
      const uint8_t* const unit = xp + static_cast<int64_t>(u) * x_unit_bytes + 16 * lane;
#pragma unroll
      for (int i = 0; i < kTokens / kWarps; ++i) {
        const int64_t x_row = act_row(warp + kWarps * i);
        const bool valid = x_row >= 0;
        if (copies) cp_async_16(act_dst + act_dst_step * i, unit + (valid ? x_row : 0) * x_row_bytes, valid ? 16 : 0);
      }
    }
    stager.issue(u, st + Tl::kActBytes + Tl::kScaleBytes + warp * Rows::kStageBytes);
    cp_async_commit();
  };

#pragma unroll
  for (int i = 0; i < kTokens / 2; ++i) acc[i] = 0.0f;

  const int64_t row_lo = src.rows.row(g), row_hi = src.rows.row(g + 8);
  const bool lo_exists = src.rows.exists(g), hi_exists = src.rows.exists(g + 8);
  auto block_ref = [&](const uint8_t* row, bool exists, int64_t n_row, int64_t k0, int s) {
    uint8_t split = 0;
    if constexpr (Traits::kSplitScales)
      split = exists ? wa.scales[n_row * wa.scale_row_stride + k0 / 32 + s] : uint8_t{0};
    return BlockRef{row + (Rows::kBlocksPerUnit == 1 ? 0 : s) * Traits::kBlockBytes, split};
  };

  // `whole` is std::true_type for a unit with all eight spans of K: the span checks then fold
  // away, and only the last unit of a K with a short tail takes the checked copy.
  auto compute = [&](int u, int slot, auto whole) {
    constexpr bool kWhole = decltype(whole)::value;
    const uint8_t* const st = ring + slot * Tl::kStageBytes;
    const uint8_t* const wst = st + Tl::kActBytes + Tl::kScaleBytes + warp * Rows::kStageBytes;
    const uint8_t* lo = staged_row<Rows>(wa, wst, g, row_lo, u);
    const uint8_t* hi = staged_row<Rows>(wa, wst, g + 8, row_hi, u);
    const int64_t k0 = static_cast<int64_t>(u) * kMmqUnitElems;
    const int64_t left = (k - k0) / 32;
    const int subs = kWhole ? 8 : (left < 8 ? static_cast<int>(left) : 8);  // spans of K in this unit
    if constexpr (kInt8) {
      // Run s + 1 is decoded while the tensor cores take run s; run s is scaled into acc once its
      // wgmma is done (wait 0: reading the int32 fragment earlier serializes every wgmma).
      const float* const x_scales = reinterpret_cast<const float*>(st + Tl::kActBytes);  // [T][8]
      struct Run {
        uint32_t frag[4];
        float w[2];  // scales of rows g, g + 8
      };
      auto decode_run = [&](int s) {
        Run r{{0, 0, 0, 0}, {0.0f, 0.0f}};
        if (s < subs) {
          const int group = Rows::kBlocksPerUnit == 1 ? s * 4 + t : t;
          const int scale_index = Rows::kBlocksPerUnit == 1 ? s : 0;
          const BlockRef b_lo = block_ref(lo, lo_exists, row_lo, k0, s), b_hi = block_ref(hi, hi_exists, row_hi, k0, s);
          const Int8Group q_lo = Traits::decode_i8(b_lo, group, cb);
          const Int8Group q_hi = Traits::decode_i8(b_hi, group, cb);
          r.frag[0] = q_lo.q[0], r.frag[1] = q_hi.q[0], r.frag[2] = q_lo.q[1], r.frag[3] = q_hi.q[1];
          r.w[0] = Traits::scale_i8(b_lo, scale_index);
          r.w[1] = Traits::scale_i8(b_hi, scale_index);
        }
        return r;
      };
      int c[kTokens / 2] = {};  // overwritten by each run's wgmma (scale-d 0)
      Run run = decode_run(0);
#pragma unroll
      for (int s = 0; s < 8; ++s) {  // 32-weight runs: one k32 wgmma each
        const uint64_t desc = sw128_kmajor_desc(st + (s >> 2) * Tl::kSliceBytes) + 2 * (s & 3);  // +32 bytes
        wgmma_fence();
        wgmma_m64k32_s8_rs<kTokens>(c, run.frag, desc, 0);
        wgmma_commit();
        const Run now = run;
        if (s < 7) run = decode_run(s + 1);
        float x[kTokens / 4];  // token scales of this lane's columns 8 (j / 2) + 2t + j % 2
#pragma unroll
        for (int j = 0; j < kTokens / 4; ++j) x[j] = x_scales[(8 * (j >> 1) + 2 * t + (j & 1)) * 8 + s];
        wgmma_wait<0>();
        fence_accumulators(c);
#pragma unroll
        for (int i = 0; i < kTokens / 2; ++i)
          acc[i] = fmaf(static_cast<float>(c[i]), now.w[(i >> 1) & 1] * x[2 * (i >> 2) + (i & 1)], acc[i]);
      }
    } else {
#pragma unroll
      for (int q = 0; q < 4; ++q) {  // 64-weight slices: decode one while the wgmma of the last runs
        uint32_t frag[4][4];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int s = 2 * q + h;
          uint32_t wlo[4] = {0, 0, 0, 0}, whi[4] = {0, 0, 0, 0};
          if (s < subs) {
            const int group = Rows::kBlocksPerUnit == 1 ? s * 4 + t : t;
            const BlockRef b_lo = block_ref(lo, lo_exists, row_lo, k0, s),
                           b_hi = block_ref(hi, hi_exists, row_hi, k0, s);
            if constexpr (Tl::kNibblePairs) {
              const int scale_index = Rows::kBlocksPerUnit == 1 ? s : 0;
              decode_nibble_pairs<Tl::kPairCopies>(Traits::code_word(b_lo, group), Traits::scale_i8(b_lo, scale_index),
                                                   pair_table, lane, wlo);
              decode_nibble_pairs<Tl::kPairCopies>(Traits::code_word(b_hi, group), Traits::scale_i8(b_hi, scale_index),
                                                   pair_table, lane, whi);
            } else if constexpr (Tl::kGridTables) {
              decode_grid_bf16<Traits>(Traits::grid_codes(b_lo, group), grid_bf16, wlo);
              decode_grid_bf16<Traits>(Traits::grid_codes(b_hi, group), grid_bf16, whi);
            } else {
              render_bf16(Traits::decode_group(b_lo, group, cb), wlo);
              render_bf16(Traits::decode_group(b_hi, group, cb), whi);
            }
          }
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            frag[2 * h + j][0] = wlo[2 * j];
            frag[2 * h + j][1] = whi[2 * j];
            frag[2 * h + j][2] = wlo[2 * j + 1];
            frag[2 * h + j][3] = whi[2 * j + 1];
          }
        }
        const uint64_t desc = sw128_kmajor_desc(st + q * Tl::kSliceBytes);
        wgmma_fence();
        fence_accumulators(acc);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) wgmma_m64k16_bf16_rs<kTokens>(acc, frag[kk], desc + 2 * kk, 1);  // +32 bytes
        wgmma_commit();
        fence_accumulators(acc);
        wgmma_wait<1>();
      }
    }
  };

  auto compute_unit = [&](int u, int slot) {
    if ((static_cast<int64_t>(u) + 1) * kMmqUnitElems <= k)
      compute(u, slot, std::true_type{});
    else
      compute(u, slot, std::false_type{});
  };

  if constexpr (Tl::kStages >= 3) {
    // Units in flight: kStages - 2 ahead of the one computed. The wgmma of a unit's last slice is
    // still running when the next unit starts; the first slice's wait of unit u - 1 retires it,
    // so after the barrier of unit u every warp is done with the slot of unit u - 2, which is
    // refilled then. cp.async groups stay one per unit (empty past the end): uniform wait counts.
    constexpr int kAhead = Tl::kStages - 2;
#pragma unroll
    for (int i = 0; i < kAhead; ++i) {
      if (u_begin + i < u_end)
        stage(u_begin + i, i);
      else
        cp_async_commit();
    }
    if constexpr (Tl::kNibblePairs && Tl::kPairCopies > 1) build_pair_table();
    for (int u = u_begin; u < u_end; ++u) {
      const int i = u - u_begin;
      cp_async_wait<kAhead - 1>();
      if constexpr (kTensorActs) mbarrier_wait_parity(act_bars + i % Tl::kStages, (i / Tl::kStages) & 1);
      fence_shared_for_async_proxy();
      __syncthreads();  // unit u's stage (and the codebook) visible to every warp; unit u - 2 retired
      if (u + kAhead < u_end)
        stage(u + kAhead, (i + kAhead) % Tl::kStages);
      else
        cp_async_commit();
      compute_unit(u, i % Tl::kStages);
    }
    wgmma_wait<0>();
    fence_accumulators(acc);
  } else {
    // Two stages (where no third fits: most tiles of 48 or more tokens, MmqTiling::kStages): the
    // next unit loads while this one computes, and the wgmma drain before the second barrier frees
    // the slot. Measured faster at 128+ tokens than 64-token tiles with four stages in flight
    // (benchmarks/NOTES.md, 2026-12-01); the other resident block fills the drains of the two-block
    // tiles. Refilling the slot after the next unit's first slice instead, with no drain, measured
    // no faster (NOTES.md, "a wide grouped tile").
    static_assert(!kInt8, "the int8 path keeps units in flight");
    stage(u_begin, 0);
    if constexpr (Tl::kNibblePairs && Tl::kPairCopies > 1) build_pair_table();
    for (int u = u_begin; u < u_end; ++u) {
      const int i = u - u_begin;
      if (u + 1 < u_end)
        stage(u + 1, (i + 1) & 1);
      else
        cp_async_commit();
      cp_async_wait<1>();
      if constexpr (kTensorActs) mbarrier_wait_parity(act_bars + (i & 1), (i >> 1) & 1);
      fence_shared_for_async_proxy();
      __syncthreads();
      compute_unit(u, i & 1);
      wgmma_wait<0>();
      fence_accumulators(acc);
      __syncthreads();  // every wgmma has read the slot before it is refilled
    }
  }
  cp_async_wait<0>();
}

// An offset from the __shared__ array itself, not an integer cast of its address: the compiler
// then knows every pointer derived from it is shared memory and issues LDS instead of generic
// loads for the staged weights and codebooks.
__device__ __forceinline__ uint8_t* aligned_mmq_smem(uint8_t* raw) {
  const auto shared_address = static_cast<uint32_t>(__cvta_generic_to_shared(raw));
  return raw + ((1024u - (shared_address & 1023u)) & 1023u);
}

// The dense scheduler: block (x, y, z) = (row tile, token tile, split of K). act_map: the bf16
// activations' tensor map (mmq_activation_map; unused by the int8 tiles).
template <class Traits, int kTokens, bool kInt8>
__global__ void __launch_bounds__(256, MmqTiling<Traits, kTokens, kInt8>::kBlocksPerSm)
    mmq_wgmma_kernel(MmqArgs a, int64_t k_pad, int splits, const __grid_constant__ CUtensorMap act_map) {
  using Tl = MmqTiling<Traits, kTokens, kInt8>;
  // A programmatic launch after the activation prologue: its blocks take their multiprocessors
  // while the prologue drains; everything below reads or writes what the prologue or the work
  // before it touched. The programmatic launches after it (the next prologue, routing or MMVQ)
  // may start their blocks in the last wave's tail: before their wait they touch only what no
  // kernel of the chain writes (the lane MMVQ its weights and codebook table; launch.h).
  pdl_wait_for_primary();
  pdl_launch_dependents();
  extern __shared__ uint8_t smem_raw[];
  uint8_t* const smem = aligned_mmq_smem(smem_raw);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * Tl::kRows;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kTokens;
  const int units = static_cast<int>(k_pad / kMmqUnitElems);
  const int u_begin = static_cast<int>(static_cast<int64_t>(blockIdx.z) * units / splits);
  const int u_end = static_cast<int>(static_cast<int64_t>(blockIdx.z + 1) * units / splits);
  const int64_t row0 = n0 + 16 * warp;  // this warp's rows: its 16 of the warpgroup's 64

  MmqTileSource src{};
  src.w.w = a.w, src.w.w_row_stride = a.w_row_stride, src.w.scales = a.scales;
  src.w.scale_row_stride = a.scale_row_stride, src.w.n = a.n, src.w.k = a.k;
  src.rows = TileRows::dense(row0, a.n);
  const auto act_row = [&](int r) -> int64_t { return m0 + r < a.m ? m0 + r : -1; };
  float acc[kTokens / 2];
  mmq_mainloop<Traits, kTokens, false, kInt8, false>(src, act_row, a.workspace, k_pad, u_begin, u_end, smem, acc,
                                                     &act_map, static_cast<int>(m0));

  float* const partial =
      splits > 1 ? reinterpret_cast<float*>(a.workspace + mmq_activation_bytes(a.m, k_pad, kInt8)) : nullptr;
#pragma unroll
  for (int i = 0; i < kTokens / 2; ++i) {
    const int64_t n = row0 + g + 8 * ((i >> 1) & 1);
    const int64_t m = m0 + 8 * (i >> 2) + 2 * t + (i & 1);
    if (n >= a.n || m >= a.m) continue;
    if (partial != nullptr)
      partial[(static_cast<int64_t>(blockIdx.z) * a.m + m) * a.n + n] = acc[i];
    else
      store_float_as(a.y, a.y_type, m * a.y_row_stride + n, acc[i]);
  }
}

// y[m, n] = the splits' partial sums (after the activations' act_bytes) added in split order.
template <class Out>
__global__ void __launch_bounds__(256) mmq_reduce_splits(MmqArgs a, int64_t act_bytes, int splits) {
  // A programmatic launch after the tiles: its blocks take the multiprocessors the tiles' last wave
  // frees and wait here for the partial sums (every block, before any read or write).
  pdl_wait_for_primary();
  pdl_launch_dependents();
  const float* partial = reinterpret_cast<const float*>(a.workspace + act_bytes);
  const int64_t total = a.m * a.n;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int s = 0; s < splits; ++s) sum += partial[s * total + i];
    const int64_t m = i / a.n;
    static_cast<Out*>(a.y)[m * a.y_row_stride + (i - m * a.n)] = from_float<Out>(sum);
  }
}

// f(Act{}) for the activations' element type (float, __nv_bfloat16 or __half).
template <class F>
void visit_activation_type(FloatType type, F&& f) {
  switch (type) {
    case FloatType::F32:
      return f(float{});
    case FloatType::BF16:
      return f(__nv_bfloat16{});
    case FloatType::F16:
      return f(__half{});
  }
}

// The permutation prologue over a.m rows of a.x into a.workspace ([a.m, k_pad] bf16), in the K
// order of type Traits' bf16 decode.
template <class Traits>
void launch_mmq_permute(const MmqArgs& a, int64_t k_pad, cudaStream_t stream) {
  const dim3 grid = mmq_prologue_grid(a.m, k_pad / 8);
  visit_activation_type(a.x_type, [&](auto act) {
    launch_programmatic<&mmq_permute_activations<decltype(act), kMmqNibblePairs<Traits>>>(
        grid, 256, 0, stream, "mmq (activations)", a, k_pad);
  });
}

// The int8 prologue over a.m rows of a.x into a.workspace (int8 units, mmq_tiling.h).
template <class Traits>
void launch_mmq_quantize(const MmqArgs& a, int64_t k_pad, cudaStream_t stream) {
  const dim3 grid = mmq_prologue_grid(a.m, k_pad / 8);
  visit_activation_type(a.x_type, [&](auto act) {
    launch_programmatic<&mmq_quantize_activations<decltype(act), Traits::kI8Order>>(grid, 256, 0, stream,
                                                                                    "mmq (int8 activations)", a, k_pad);
  });
}

// The tensor map of the bf16 activations in the workspace ([m][k_pad], mmq_permute_activations) for
// tiles of `tokens` rows: a box is one 64-weight slice of the tile, in wgmma's 128-byte swizzle.
inline CUtensorMap mmq_activation_map(const MmqArgs& a, int64_t k_pad, int tokens) {
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(k_pad), static_cast<cuuint64_t>(a.m)};
  const uint32_t box[2] = {64, static_cast<uint32_t>(tokens)};
  // (the kernel's box coordinates are int32)
  LOWBIT_CHECK(a.m < (int64_t{1} << 31) && k_pad < (int64_t{1} << 31), "mmq: x has ", a.m, " rows of ", k_pad,
               " padded columns; the bf16 tiles take fewer than 2^31 of each");
  LOWBIT_CHECK(encode_bf16_map_2d_sw128(&map, a.workspace, dims, static_cast<cuuint64_t>(k_pad) * 2, box),
               "mmq: the driver encoded no tensor map of the activations (its cuTensorMapEncodeTiled refused or is "
               "missing)");
  return map;
}

template <class Traits, int kTokens, bool kInt8>
void launch_mmq_tiles(const MmqArgs& a, const MmqConfig& c, cudaStream_t stream) {
  using Tl = MmqTiling<Traits, kTokens, kInt8>;
  auto* kernel = &mmq_wgmma_kernel<Traits, kTokens, kInt8>;
  const CUtensorMap act_map = Tl::kTensorActs ? mmq_activation_map(a, c.k_pad, kTokens) : CUtensorMap{};
  configure_shared_memory(reinterpret_cast<const void*>(kernel), Tl::kSmemBytes, "mmq");
  const dim3 grid(static_cast<unsigned>((a.n + Tl::kRows - 1) / Tl::kRows),
                  static_cast<unsigned>((a.m + kTokens - 1) / kTokens), static_cast<unsigned>(c.splits));
  launch_programmatic<&mmq_wgmma_kernel<Traits, kTokens, kInt8>>(grid, Tl::kThreads, Tl::kSmemBytes, stream, "mmq", a,
                                                                 c.k_pad, c.splits, act_map);
}

template <QuantType T>
void launch_mmq(const MmqArgs& a, const MmqConfig& c, cudaStream_t stream) {
  using Traits = FormatTraits<T>;
  LOWBIT_CHECK(c.rows_per_tile == 128, "mmq: the kernel's block owns 128 rows, the configuration says ",
               c.rows_per_tile);
  bool launched = false;
  if (c.int8) {
    launched = visit_int8_token_tile<Traits>(c.tokens_per_tile, [&](auto tile) {
      launch_mmq_quantize<Traits>(a, c.k_pad, stream);
      launch_mmq_tiles<Traits, tile(), true>(a, c, stream);
    });
    if (!launched)
      detail::fail("mmq: no int8 kernel for ", Traits::kName, " at ", c.tokens_per_tile, " tokens per tile");
  } else {
    launch_mmq_permute<Traits>(a, c.k_pad, stream);
    launched =
        visit_token_tile(c.tokens_per_tile, [&](auto tile) { launch_mmq_tiles<Traits, tile(), false>(a, c, stream); });
    if (!launched) detail::fail("mmq: no kernel for ", c.tokens_per_tile, " tokens per tile");
  }
  if (c.splits > 1) {
    const int64_t total = a.m * a.n;
    const int64_t act_bytes = mmq_activation_bytes(a.m, c.k_pad, c.int8);
    const unsigned rblocks = static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, 65535 * 16));
    if (a.y_type == FloatType::F32)
      launch_programmatic<&mmq_reduce_splits<float>>(rblocks, 256, 0, stream, "mmq (split sums)", a, act_bytes,
                                                     c.splits);
    else if (a.y_type == FloatType::BF16)
      launch_programmatic<&mmq_reduce_splits<__nv_bfloat16>>(rblocks, 256, 0, stream, "mmq (split sums)", a, act_bytes,
                                                             c.splits);
    else
      launch_programmatic<&mmq_reduce_splits<__half>>(rblocks, 256, 0, stream, "mmq (split sums)", a, act_bytes,
                                                      c.splits);
  }
}

}  // namespace lowbit::cuda_detail
