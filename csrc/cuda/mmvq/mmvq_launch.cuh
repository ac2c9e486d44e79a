// The MMVQ launchers: the pass a plan describes (MmvqConfig, planned by src/mmvq_policy.cpp from
// mmvq_tiling.h) runs its kernel here, with the int8 prologue where the plan asks for it.
#pragma once

#include "cuda/common/int8_activations.cuh"
#include "cuda/common/launch.h"
#include "cuda/common/tensor_map.h"
#include "cuda/mmvq/bf16_kernel.cuh"
#include "cuda/mmvq/int8_kernel.cuh"
#include "cuda/mmvq/lane_kernel.cuh"
#include "cuda/mmvq/mmvq_args.h"
#include "lowbit/cuda_limits.h"
#include "lowbit/error.h"

namespace lowbit::cuda_detail {

// Quantizes the activations into a.xq / a.xs: the int8 prologue that every tensor-core int8 MMVQ
// kernel and the dp4a kernel of four tokens read.
template <class Traits, class Act>
void launch_int8_prologue(const MmvqArgs& a, cudaStream_t stream) {
  LOWBIT_CHECK(a.xq != nullptr && a.xs != nullptr,
               "mmvq: the int8 prologue runs without its activation workspace (route mismatch)");
  const int64_t threads = (a.m + 7) / 8 * a.k;  // chunks of 8 tokens x K / 8 groups
  constexpr auto kernel = &quantize_activations_kernel<Act, Traits::kI8Order>;
  launch_programmatic<kernel>(static_cast<unsigned>((threads + 255) / 256), 256, 0, stream, "mmvq (int8 activations)",
                              a, const_cast<uint8_t*>(a.xq), const_cast<float*>(a.xs));
}

// Launches the prologue and the int8 MMVQ on the plan's grid (warps = threads / 32 > 0).
template <class Traits, class Act, int kMaxTokens>
void launch_mmvq_int8_as(const MmvqArgs& a, const MmvqConfig& config, cudaStream_t stream) {
  using Tl = MmvqInt8Tiling<Traits, kMaxTokens>;
  static_assert(Traits::kI8ScaleElems == 32 || (Traits::kI8Order == I8Order::kContiguous && Tl::kBlocksPerUnit == 1),
                "16-weight scales: lanes t < 2 must hold the first half of a sub-block of a 256-weight block");
  constexpr auto kernel = &mmvq_int8_kernel<Traits, Act, kMaxTokens>;
  const DeviceLimits& limits = current_device_limits();
  const int smem_max = Tl::smem_bytes(Tl::kMaxWarps) < limits.shared_per_block_optin ? Tl::smem_bytes(Tl::kMaxWarps)
                                                                                     : limits.shared_per_block_optin;
  configure_shared_memory(reinterpret_cast<const void*>(kernel), smem_max, "mmvq (int8)");  // once, for any warps
  launch_int8_prologue<Traits, Act>(a, stream);
  launch_programmatic<kernel>(config.blocks, config.threads, config.shared_bytes, stream, "mmvq (int8)", a);
}

// Whether the lane kernels can read a weight's blocks as aligned words (kWords): rows 4-byte
// aligned, and where blocks are 2 mod 4 bytes long an even number of them per row (so that they
// pair into 4-byte-aligned spans). The data pointer is 16-byte aligned (cuda::mmvq checks it).
template <class Traits>
bool blocks_pair_aligned(const MmvqArgs& a) {
  const bool paired = Traits::kBlockBytes % 4 == 0 || (a.k / Traits::kBlockElems) % 2 == 0;
  return paired && a.w_row_stride % 4 == 0;
}

// The pairs mode (MmvqPairs: the MoE vector projection of one-token pairs) on a grid of pairs x
// row tiles, flattened in x (checked by the caller to fit 2^31 - 1 blocks), with int8_pairs_warps
// warps per tile. The prologue quantizes a.m rows of bf16 activations.
template <class Traits>
void launch_mmvq_int8_pairs(const MmvqPairArgs& a, cudaStream_t stream) {
  using Tl = MmvqInt8Tiling<Traits, 1>;
  static_assert(Traits::kI8ScaleElems == 32 || (Traits::kI8Order == I8Order::kContiguous && Tl::kBlocksPerUnit == 1),
                "16-weight scales: lanes t < 2 must hold the first half of a sub-block of a 256-weight block");
  constexpr auto plain = &mmvq_int8_kernel<Traits, float, 1, MmvqMode::kPairs>;
  constexpr auto gated = &mmvq_int8_kernel<Traits, float, 1, MmvqMode::kGatedPairs>;
  const DeviceLimits& limits = current_device_limits();
  DeviceFacts device;
  device.shared_per_block_optin = limits.shared_per_block_optin;
  device.shared_per_sm = limits.shared_per_sm;
  device.multiprocessors = limits.sms;
  const int warps = int8_pairs_warps<Traits>(a.k, device);
  LOWBIT_CHECK(warps > 0,
               "moe_vec: one warp's weight ring of the int8 kernel does not fit this device's shared memory");
  const int smem_max = Tl::smem_bytes(Tl::kPairsMaxWarps) < limits.shared_per_block_optin
                           ? Tl::smem_bytes(Tl::kPairsMaxWarps)
                           : limits.shared_per_block_optin;
  const auto kernel = a.pairs.gated ? gated : plain;
  configure_shared_memory(reinterpret_cast<const void*>(kernel), smem_max, "moe_vec (int8)");
  launch_int8_prologue<Traits, __nv_bfloat16>(a, stream);
  const auto blocks = static_cast<unsigned>(a.pairs.count * pair_tiles(a, a.pairs.gated));
  if (a.pairs.gated)
    launch_programmatic<gated>(blocks, 32 * warps, Tl::smem_bytes(warps), stream, "moe_vec (int8, gated)", a);
  else
    launch_programmatic<plain>(blocks, 32 * warps, Tl::smem_bytes(warps), stream, "moe_vec (int8)", a);
}

template <auto kKernel, class... Args>
void launch_lane_pairs_kernel(const LanePairsGrid& g, cudaStream_t stream, const Args&... args) {
  if (g.smem > 48 * 1024)  // the device's most, once: any later shape fits the one setting
    configure_shared_memory(reinterpret_cast<const void*>(kKernel), current_device_limits().shared_per_block_optin,
                            "moe_vec (dp4a lanes)");
  launch_programmatic<kKernel>(g.blocks, g.threads, g.smem, stream, "moe_vec (dp4a lanes)", args...);
}

// The staged rounds' tensor map (lane_kernel_body's w_map): the experts' rows as 32-bit words, a
// box a stage unit of an item's rows (gated: of its gate rows, then of its up rows). False where
// the TMA cannot take these weights (the unstaged kernel serves).
template <class Traits, bool kGated, bool kFew>
bool encode_stage_map(const MmvqPairArgs& a, CUtensorMap& w_map) {
  using Tl = MmvqLaneTiling<Traits>;
  constexpr LaneShape kShape = lane_pairs_shape<Traits>(false, kGated, kFew);
  const int64_t row_bytes = a.k / Traits::kBlockElems * Traits::kBlockBytes;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(row_bytes / 4), static_cast<cuuint64_t>(a.n),
                              static_cast<cuuint64_t>(a.pairs.expert_count)};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(Tl::kStageUnitBytes / 4),
                             static_cast<cuuint32_t>(kGated ? kShape.rows / 2 : kShape.rows), 1};
  // (the kernel's box coordinates are int32: rows and experts below 2^31)
  return row_bytes % 4 == 0 && a.n < (int64_t{1} << 31) && a.pairs.expert_count < (int64_t{1} << 31) &&
         encode_word_map_3d(&w_map, a.w, dims, static_cast<cuuint64_t>(a.w_row_stride),
                            static_cast<cuuint64_t>(a.pairs.w_expert_stride), box);
}

// The pairs mode on the dp4a lane kernel (lane_pairs.cuh): one kernel, each block quantizing the
// activation rows of its pairs (no prologue, no workspace). Returns false, launching nothing, where
// the lane kernel has no one-token shape for the type or one activation row does not fit a block's
// shared memory (launch_mmvq_int8_pairs serves there).
template <class Traits>
bool launch_mmvq_lane_pairs(MmvqPairArgs a, cudaStream_t stream) {
  if constexpr (!HasInt8<Traits>::value || lane_shape<Traits>(1).rows == 0) {
    return false;
  } else {
    CUtensorMap w_map{};  // the staged rounds' (encode_stage_map)
    const DeviceLimits& limits = current_device_limits();
    DeviceFacts device;
    device.shared_per_block_optin = limits.shared_per_block_optin;
    device.shared_per_sm = limits.shared_per_sm;
    device.multiprocessors = limits.sms;
    auto launch = [&](auto gated, auto few) {
      constexpr bool kGated = decltype(gated)::value, kFew = decltype(few)::value;
      constexpr MmvqMode kMode = kGated ? MmvqMode::kGatedPairs : MmvqMode::kPairs;
      LanePairsGrid g = lane_pairs_grid<Traits, kGated, kFew>(a.n, a.k, a.pairs.count, a.pairs.x_pair_divisor, device);
      if (!g.fits) return false;
      // staged rounds where the shape asks for them, the device has bulk copies, the rows (so their
      // stage units) are whole 16-byte units, the rings fit beside the unstaged kernel's runs and
      // the weights have a tensor map
      bool staged = false;
      if constexpr (lane_pairs_shape<Traits>(false, kGated, kFew).staged) {
        if (limits.compute_major >= 9 &&
            MmvqLaneTiling<Traits>::rows_in_16_byte_units(a.w, a.k, a.w_row_stride, a.pairs.w_expert_stride) &&
            encode_stage_map<Traits, kGated, kFew>(a, w_map)) {
          const LanePairsGrid s =
              lane_pairs_grid<Traits, kGated, kFew>(a.n, a.k, a.pairs.count, a.pairs.x_pair_divisor, device, true);
          staged = s.fits && s.items_per_block == g.items_per_block && s.threads == g.threads;
          if (staged) g = s;
        }
      }
      a.pairs.items_per_block = g.items_per_block;
      // (staged rounds read lane words from their copies: before the global aligned words)
      if constexpr (lane_pairs_shape<Traits>(false, kGated, kFew).staged) {
        if (staged) {
          launch_lane_pairs_kernel<&mmvq_lane_staged_kernel<Traits, kMode, kFew>>(g, stream, a, w_map);
          return true;
        }
      }
      // aligned words where the shape asks for them and every expert's rows allow them
      if constexpr (HasLaneWords<Traits>::value && lane_pairs_shape<Traits>(true, kGated, kFew).words) {
        if (blocks_pair_aligned<Traits>(a) && a.pairs.w_expert_stride % 4 == 0) {
          launch_lane_pairs_kernel<&mmvq_lane_pairs_kernel<Traits, kMode, true, kFew>>(g, stream, a);
          return true;
        }
      }
      launch_lane_pairs_kernel<&mmvq_lane_pairs_kernel<Traits, kMode, false, kFew>>(g, stream, a);
      return true;
    };
    auto launch_gated = [&](auto gated) {
      constexpr bool kGated = decltype(gated)::value;
      if constexpr (lane_pairs_has_few<Traits>()) {
        if (lane_pairs_few<Traits, kGated>(a.n, a.pairs.count, device)) return launch(gated, std::true_type{});
      }
      return launch(gated, std::false_type{});
    };
    return a.pairs.gated ? launch_gated(std::true_type{}) : launch_gated(std::false_type{});
  }
}

template <auto kKernel>
void launch_lane_kernel(const MmvqArgs& a, const MmvqConfig& config, cudaStream_t stream) {
  // above the default 48 KB only: then whatever K a later call brings fits the one setting
  if (config.shared_bytes > 48 * 1024)
    configure_shared_memory(reinterpret_cast<const void*>(kKernel), current_device_limits().shared_per_block_optin,
                            "mmvq (int8 lanes)");
  launch_programmatic<kKernel>(config.blocks, config.threads, config.shared_bytes, stream, "mmvq (int8 lanes)", a);
}

template <class Traits, class Act, int kTokens>
void launch_mmvq_lane_as(const MmvqArgs& a, const MmvqConfig& config, cudaStream_t stream) {
  if constexpr (kTokens > 2) launch_int8_prologue<Traits, Act>(a, stream);
  if constexpr (HasLaneWords<Traits>::value && lane_shape<Traits>(kTokens).words) {
    if (blocks_pair_aligned<Traits>(a))
      return launch_lane_kernel<&mmvq_lane_kernel<Traits, Act, kTokens, true>>(a, config, stream);
  }
  launch_lane_kernel<&mmvq_lane_kernel<Traits, Act, kTokens>>(a, config, stream);
}

template <QuantType T>
void launch_mmvq(const MmvqArgs& a, FloatType act_type, const MmvqConfig& config, cudaStream_t stream) {
  using Traits = FormatTraits<T>;
  auto run = [&](auto act) {
    using Act = decltype(act);
    if constexpr (HasInt8<Traits>::value) {
      if (config.kernel == MmvqKernel::kDp4a) {
        if constexpr (lane_shape<Traits>(1).rows > 0)
          if (config.kernel_tokens == 1) return launch_mmvq_lane_as<Traits, Act, 1>(a, config, stream);
        if constexpr (lane_shape<Traits>(2).rows > 0)
          if (config.kernel_tokens == 2) return launch_mmvq_lane_as<Traits, Act, 2>(a, config, stream);
        if constexpr (lane_shape<Traits>(4).rows > 0)
          if (config.kernel_tokens == 4) return launch_mmvq_lane_as<Traits, Act, 4>(a, config, stream);
      }
      if (config.kernel == MmvqKernel::kInt8TensorCores) {
        if (config.kernel_tokens == 1) return launch_mmvq_int8_as<Traits, Act, 1>(a, config, stream);
        if (config.kernel_tokens == 2) return launch_mmvq_int8_as<Traits, Act, 2>(a, config, stream);
        if (config.kernel_tokens == 4) return launch_mmvq_int8_as<Traits, Act, 4>(a, config, stream);
        if (config.kernel_tokens == 8) return launch_mmvq_int8_as<Traits, Act, 8>(a, config, stream);
      }
    }
    LOWBIT_CHECK(config.kernel == MmvqKernel::kBf16TensorCores, "plan: ", mmvq_kernel_name(config.kernel), " MMVQ of ",
                 config.kernel_tokens, " tokens does not exist for ", type_name(T));
    if (config.kernel_tokens <= 8) return launch_mmvq_tiles<Traits, 1, Act>(a, stream);
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
