// MMVQ on integer tensor cores: y = x W^T for up to 8 tokens, weights decoded straight to their
// int8 codes (the format's decode_i8).
//
// A prologue kernel quantizes the activations once per call: per token and 32 weights,
// d = amax * (1/127), q = rint(x * (127 / amax)) (ggml's q8_1 precision, without its sum), each
// 32-weight run stored in the format's I8Order so that a lane's eight codes are one 8-byte load.
// The MMVQ kernel has the tiling and weight pipeline of the bf16 MMVQ (mmvq_kernel.cuh): a block
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
// Cost per 8 weights is a table lookup or two and a few integer operations, against about 35
// instructions for the bf16 render: the bf16 kernel was bound by instruction issue (NOTES.md).
#pragma once

#include <atomic>

#include "cuda/int8_activations.cuh"
#include "cuda/mmvq_kernel.cuh"
#include "cuda/mmvq_lane_kernel.cuh"
#include "lowbit/cuda_limits.h"
#include "lowbit/error.h"

namespace lowbit::cuda_detail {

template <class Traits, int kMaxTokens>
struct MmvqInt8Tiling : MmvqTiling<Traits> {
  using Base = MmvqTiling<Traits>;
  static constexpr int kTableBytes = kInt8TableBytes<Traits>;
  // Two stages per warp: with up to 14 warps per block (two blocks per SM), a unit takes a warp
  // longer than a DRAM round trip, so one unit in flight suffices (and fits shared memory).
  // A stage holds the 16 rows' bytes, then the unit's int8 activations [token][256] and its
  // activation scales [sub-block][8 tokens].
  static constexpr int kStages = 2;
  static constexpr int kActBytes = kMaxTokens * 256;
  static constexpr int kSlotBytes = Base::kStageBytes + kActBytes + 256;
  static constexpr int kWarpBytes = kStages * kSlotBytes;
  static constexpr int kMaxWarps = 14;  // __launch_bounds__: two blocks of 448 threads at <= 72 registers
  static constexpr int smem_bytes(int warps) {
    return kTableBytes + (warps * kWarpBytes > warps * 512 ? warps * kWarpBytes : warps * 512);
  }
};

template <class Traits, class Act, int kMaxTokens>
__global__ void __launch_bounds__(32 * MmvqInt8Tiling<Traits, kMaxTokens>::kMaxWarps, 2) mmvq_int8_kernel(MmvqArgs a) {
  using Tl = MmvqInt8Tiling<Traits, kMaxTokens>;
  extern __shared__ __align__(16) uint8_t smem[];
  uint8_t* const staging = smem + Tl::kTableBytes;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * Tl::kRows;
  const int64_t row_bytes = a.k / Traits::kBlockElems * Traits::kBlockBytes;
  const int units = static_cast<int>((a.k + Tl::kUnitElems - 1) / Tl::kUnitElems);
  const int warps = static_cast<int>(blockDim.x >> 5);  // K slices, chosen at launch
  const int u_begin = warp * units / warps;
  const int u_end = (warp + 1) * units / warps;
  uint8_t* const ring = staging + warp * Tl::kWarpBytes;

  const RowStager<Tl> stager(a, row0, row_bytes, lane);
  // A unit's weights, then its activation codes (16-byte pieces of each token's 256) and scales
  // (16 pieces); one cp.async group.
  auto stage_activations = [&](int u, int slot) {
    uint8_t* dst = ring + slot * Tl::kSlotBytes + Tl::kStageBytes;
    const int64_t k0 = static_cast<int64_t>(u) * Tl::kUnitElems;
    const int pieces = static_cast<int>((a.k - k0 < 256 ? a.k - k0 : 256) / 16);  // K: whole 32s
    for (int p = lane; p < (a.m + 1) * 16; p += 32) {
      const int m = p / 16 - 1, piece = p % 16;
      if (m < 0) {  // scales of sub-blocks 8u .., 8 floats each: 2 pieces per sub-block
        if (piece < pieces) cp_async_16(dst + Tl::kActBytes + 16 * piece, a.xs + 8 * (k0 / 32) + 4 * piece, 16);
      } else if (piece < pieces) {
        cp_async_16(dst + m * 256 + 16 * piece, a.xq + m * a.k + k0 + 16 * piece, 16);
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
  const int64_t row_lo = row0 + g, row_hi = row0 + g + 8;

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
      const int m0 = (2 * t) % kMaxTokens, m1 = (2 * t + 1) % kMaxTokens;
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
  reduce_and_store<1, Act>(a, reinterpret_cast<float*>(staging), acc, row0, warp, lane);
}

// K slices per 16-row tile: as few units per warp as possible (the block's makespan), then as
// few warps as reach it, within `budget` bytes of shared memory per block. K = 14336 (56 units)
// on an H200: 14 warps of 4 units. 0 when not even one warp fits.
template <class Tl>
int int8_warps_per_tile(int64_t k, int budget) {
  const int units = static_cast<int>((k + Tl::kUnitElems - 1) / Tl::kUnitElems);
  int best = 0;
  for (int w = 1; w <= Tl::kMaxWarps && Tl::smem_bytes(w) <= budget; ++w)
    if (best == 0 || (units + w - 1) / w < (units + best - 1) / best) best = w;
  return best;
}

// Launches kKernel(args...) as a programmatic dependent of the work before it in the stream
// where the code that runs was compiled with griddepcontrol (PTX 9.0+, not e.g. a compute_89 PTX
// JIT-compiled for a newer GPU): its blocks may then start while the kernel before finishes (it
// reads only weights until pdl_wait_for_primary), else a plain stream-ordered launch.
template <auto kKernel, class... Args>
void launch_programmatic(unsigned blocks, int threads, int smem, cudaStream_t stream, const char* name,
                         const Args&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = static_cast<size_t>(smem);
  config.stream = stream;
  cudaLaunchAttribute overlap[1];
  overlap[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap[0].val.programmaticStreamSerializationAllowed = 1;
  static std::atomic<int> programmatic[64];  // per device: 0 not asked, 1 no, 2 yes
  int device = 0;
  cudaGetDevice(&device);
  int pdl = device < 64 ? programmatic[device].load(std::memory_order_relaxed) : 1;
  if (pdl == 0) {
    pdl = kernel_has_programmatic_launch(reinterpret_cast<const void*>(kKernel)) ? 2 : 1;
    if (device < 64) programmatic[device].store(pdl, std::memory_order_relaxed);
  }
  if (pdl == 2) {
    config.attrs = overlap;
    config.numAttrs = 1;
  }
  launch_checked(name, cudaLaunchKernelEx(&config, kKernel, args...));
}

// Quantizes the activations into a.xq / a.xs: the int8 prologue that every tensor-core int8 MMVQ
// kernel and the dp4a kernel of four tokens read.
template <class Traits, class Act>
void launch_int8_prologue(const MmvqArgs& a, cudaStream_t stream) {
  LOWBIT_CHECK(a.xq != nullptr && a.xs != nullptr,
               "mmvq: the int8 prologue runs without its activation workspace (route mismatch)");
  const int64_t threads = a.k;  // 8 tokens x K / 8 groups
  constexpr auto kernel = &quantize_activations_kernel<Act, Traits::kI8Order>;
  launch_programmatic<kernel>(static_cast<unsigned>((threads + 255) / 256), 256, 0, stream, "mmvq (int8 activations)",
                              a, const_cast<uint8_t*>(a.xq), const_cast<float*>(a.xs));
}

// Warps per tile of the int8 tensor-core MMVQ for K on this device: two blocks per SM where they
// fit (the SM's memory less 1 KB per block), else one; 0 where not even one warp's ring fits.
template <class Traits, int kMaxTokens>
int int8_mma_warps(int64_t k, const DeviceLimits& limits) {
  using Tl = MmvqInt8Tiling<Traits, kMaxTokens>;
  const int warps = int8_warps_per_tile<Tl>(k, limits.shared_per_sm / 2 - 1024);
  return warps >= 4 ? warps : int8_warps_per_tile<Tl>(k, limits.shared_per_block_optin);
}

// Launches the prologue and the int8 MMVQ (`warps` from int8_mma_warps, > 0).
template <class Traits, class Act, int kMaxTokens>
void launch_mmvq_int8_as(const MmvqArgs& a, int warps, cudaStream_t stream) {
  using Tl = MmvqInt8Tiling<Traits, kMaxTokens>;
  static_assert(Traits::kI8ScaleElems == 32 || (Traits::kI8Order == I8Order::kContiguous && Tl::kBlocksPerUnit == 1),
                "16-weight scales: lanes t < 2 must hold the first half of a sub-block of a 256-weight block");
  constexpr auto kernel = &mmvq_int8_kernel<Traits, Act, kMaxTokens>;
  const DeviceLimits& limits = current_device_limits();
  const int smem_max = Tl::smem_bytes(Tl::kMaxWarps) < limits.shared_per_block_optin ? Tl::smem_bytes(Tl::kMaxWarps)
                                                                                     : limits.shared_per_block_optin;
  configure_shared_memory(reinterpret_cast<const void*>(kernel), smem_max);  // once, for any warp count
  launch_int8_prologue<Traits, Act>(a, stream);
  launch_programmatic<kernel>(static_cast<unsigned>((a.n + Tl::kRows - 1) / Tl::kRows), 32 * warps,
                              Tl::smem_bytes(warps), stream, "mmvq (int8)", a);
}

// The dp4a MMVQ's grid for N x K and kTokens tokens on this device (LaneGrid, launch.h): one
// block per SM (fewer where the row groups are fewer), teams per block the fewest that cover the
// groups; fits is false where a block's shared memory cannot hold the activations.
template <class Traits, int kTokens>
LaneGrid lane_grid(int64_t n, int64_t k, const DeviceLimits& limits) {
  using Tl = MmvqLaneTiling<Traits>;
  constexpr LaneShape kShape = lane_shape<Traits>(kTokens);
  constexpr int kMaxTeams = kLaneBlockWarps / kShape.team_warps;
  const int64_t groups = (n + kShape.rows - 1) / kShape.rows;
  const int64_t sms = limits.sms;
  int64_t teams = (groups + sms - 1) / sms;
  teams = teams < 1 ? 1 : (teams > kMaxTeams ? kMaxTeams : teams);
  const int64_t smem = Tl::template smem_bytes<kTokens>(k, static_cast<int>(teams));
  // Blocks beyond one per SM would wait for a second wave (teams then loop over the groups): with
  // fewer teams than the most a block takes, the blocks are fewer than the SMs anyway, and with
  // the most (1024 threads at 64 registers: a whole register file) one block fills an SM.
  const int64_t need = (groups + teams - 1) / teams;
  return {smem <= limits.shared_per_block_optin, static_cast<unsigned>(need < sms ? need : sms),
          static_cast<int>(32 * kShape.team_warps * teams), static_cast<int>(smem)};
}

// Whether mmvq_lane_kernel can read a weight's blocks as aligned words (kWords): rows 4-byte
// aligned, and where blocks are 2 mod 4 bytes long an even number of them per row (so that they
// pair into 4-byte-aligned spans). The data pointer is 16-byte aligned (cuda::mmvq checks it).
template <class Traits>
bool blocks_pair_aligned(const MmvqArgs& a) {
  const bool paired = Traits::kBlockBytes % 4 == 0 || (a.k / Traits::kBlockElems) % 2 == 0;
  return paired && a.w_row_stride % 4 == 0;
}

template <auto kKernel>
void launch_lane_kernel(const MmvqArgs& a, const LaneGrid& grid, cudaStream_t stream) {
  // above the default 48 KB only: then whatever K a later call brings fits the one setting
  if (grid.smem > 48 * 1024)
    configure_shared_memory(reinterpret_cast<const void*>(kKernel), current_device_limits().shared_per_block_optin);
  launch_programmatic<kKernel>(grid.blocks, grid.threads, grid.smem, stream, "mmvq (int8 lanes)", a);
}

template <class Traits, class Act, int kTokens>
void launch_mmvq_lane_as(const MmvqArgs& a, const LaneGrid& grid, cudaStream_t stream) {
  if constexpr (kTokens > 2) launch_int8_prologue<Traits, Act>(a, stream);
  if constexpr (HasLaneWords<Traits>::value && lane_shape<Traits>(kTokens).words) {
    if (blocks_pair_aligned<Traits>(a))
      return launch_lane_kernel<&mmvq_lane_kernel<Traits, Act, kTokens, true>>(a, grid, stream);
  }
  launch_lane_kernel<&mmvq_lane_kernel<Traits, Act, kTokens>>(a, grid, stream);
}

// Which MMVQ kernel serves one weight type, and its launch shape (MmvqPlan, launch.h): where the
// format has an int8 form (and `math`, already resolved, is not bf16), dp4a lanes at M = 1 to 4
// where lane_shape says they are faster and the activations fit a block's shared memory, int8
// tensor cores up to M = 8 where a warp's ring fits; bf16 tensor cores otherwise (and for MXFP8,
// and beyond 8 tokens).
template <QuantType T>
MmvqPlan plan_mmvq(int64_t n, int64_t k, int64_t m, MmvqMath math) {
  using Traits = FormatTraits<T>;
  MmvqPlan plan;
  if constexpr (HasInt8<Traits>::value) {
    static_assert(kMmvqInt8MaxTokens == 8, "token counts round up to 1, 2, 4 or 8");
    if (math == MmvqMath::kBf16 || m > kMmvqInt8MaxTokens) return plan;
    const DeviceLimits& limits = current_device_limits();
    if (m == 1) {
      if constexpr (lane_shape<Traits>(1).rows > 0) plan.lanes = lane_grid<Traits, 1>(n, k, limits);
    } else if (m == 2) {
      if constexpr (lane_shape<Traits>(2).rows > 0) plan.lanes = lane_grid<Traits, 2>(n, k, limits);
    } else if (m <= 4) {
      if constexpr (lane_shape<Traits>(4).rows > 0) plan.lanes = lane_grid<Traits, 4>(n, k, limits);
    }
    if (plan.lanes.fits) {
      plan.kernel = cuda::MmvqKernel::kDp4a;
      plan.int8_prologue = m > 2;
      return plan;
    }
    plan.int8_warps = m == 1   ? int8_mma_warps<Traits, 1>(k, limits)
                      : m == 2 ? int8_mma_warps<Traits, 2>(k, limits)
                      : m <= 4 ? int8_mma_warps<Traits, 4>(k, limits)
                               : int8_mma_warps<Traits, 8>(k, limits);
    if (plan.int8_warps > 0) {
      plan.kernel = cuda::MmvqKernel::kInt8TensorCores;
      plan.int8_prologue = true;
    }
  }
  return plan;
}

// The MMVQ entry of one weight type: runs the kernel `plan` (plan_mmvq<T> for these arguments) picks.
template <QuantType T>
void launch_mmvq(const MmvqArgs& a, FloatType act_type, const MmvqPlan& plan, cudaStream_t stream) {
  using Traits = FormatTraits<T>;
  auto run = [&](auto act) {
    using Act = decltype(act);
    if constexpr (HasInt8<Traits>::value) {
      if (plan.kernel == cuda::MmvqKernel::kDp4a) {
        if constexpr (lane_shape<Traits>(1).rows > 0)
          if (a.m == 1) return launch_mmvq_lane_as<Traits, Act, 1>(a, plan.lanes, stream);
        if constexpr (lane_shape<Traits>(2).rows > 0)
          if (a.m == 2) return launch_mmvq_lane_as<Traits, Act, 2>(a, plan.lanes, stream);
        if constexpr (lane_shape<Traits>(4).rows > 0)
          if (a.m == 3 || a.m == 4) return launch_mmvq_lane_as<Traits, Act, 4>(a, plan.lanes, stream);
      }
      if (plan.kernel == cuda::MmvqKernel::kInt8TensorCores) {
        if (a.m == 1) return launch_mmvq_int8_as<Traits, Act, 1>(a, plan.int8_warps, stream);
        if (a.m == 2) return launch_mmvq_int8_as<Traits, Act, 2>(a, plan.int8_warps, stream);
        if (a.m <= 4) return launch_mmvq_int8_as<Traits, Act, 4>(a, plan.int8_warps, stream);
        return launch_mmvq_int8_as<Traits, Act, 8>(a, plan.int8_warps, stream);
      }
    }
    if (a.m <= 8) return launch_mmvq_tiles<Traits, 1, Act>(a, stream);
    return launch_mmvq_tiles<Traits, 2, Act>(a, stream);
  };
  switch (act_type) {
    case FloatType::F32:
      return run(float{});
    case FloatType::BF16:
      return run(__nv_bfloat16{});
    case FloatType::F16:
      return run(__half{});
  }
}

}  // namespace lowbit::cuda_detail
