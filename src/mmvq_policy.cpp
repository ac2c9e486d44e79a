// Which MMVQ kernel serves a pass of M <= 16 tokens, and its launch shape, from the kernels' own
// tilings and tuning table (csrc/cuda/mmvq/mmvq_tiling.h): pure C++, so that the plan a CUDA call
// runs is the one tests and Python see on any machine.
#include "cuda/common/int8_activation_layout.h"
#include "cuda/mmvq/mmvq_tiling.h"
#include "lowbit/cuda_limits.h"
#include "lowbit/error.h"
#include "lowbit/formats/all.h"
#include "lowbit/plan.h"
#include "lowbit/weights.h"

namespace lowbit {
namespace {

using cuda_detail::LaneGrid;

// The lane kernel's token count for M = 1..4 (three tokens run the kernel of four).
constexpr int lane_tokens(int64_t m) {
  return m <= 2 ? static_cast<int>(m) : 4;
}
// The int8 tensor-core kernel's token count: M rounded up to 1, 2, 4 or 8.
constexpr int int8_tokens(int64_t m) {
  return m == 1 ? 1 : m == 2 ? 2 : m <= 4 ? 4 : 8;
}

template <class Traits>
LaneGrid plan_lanes(int64_t n, int64_t k, int64_t m, const DeviceFacts& device) {
  using cuda_detail::lane_grid;
  using cuda_detail::lane_shape;
  if (m == 1) {
    if constexpr (lane_shape<Traits>(1).rows > 0) return lane_grid<Traits, 1>(n, k, device);
  } else if (m == 2) {
    if constexpr (lane_shape<Traits>(2).rows > 0) return lane_grid<Traits, 2>(n, k, device);
  } else if (m <= 4) {
    if constexpr (lane_shape<Traits>(4).rows > 0) return lane_grid<Traits, 4>(n, k, device);
  }
  return LaneGrid{false, 0, 0, 0};
}

template <class Traits>
int plan_int8_warps(int64_t k, int tokens, const DeviceFacts& device) {
  using cuda_detail::int8_mma_warps;
  return tokens == 1   ? int8_mma_warps<Traits, 1>(k, device)
         : tokens == 2 ? int8_mma_warps<Traits, 2>(k, device)
         : tokens == 4 ? int8_mma_warps<Traits, 4>(k, device)
                       : int8_mma_warps<Traits, 8>(k, device);
}

// Where the format has an int8 form (and `math`, resolved, is not bf16): dp4a lanes at M = 1 to 4
// where the tuning table says they are faster and the activations fit a block's shared memory,
// int8 tensor cores up to M = 8 where a warp's ring fits; bf16 tensor cores otherwise (and for
// MXFP8, and beyond 8 tokens).
template <class Traits>
MmvqConfig plan_pass(int64_t n, int64_t k, int64_t m, MmvqMath math, const DeviceFacts& device) {
  using Tiling = cuda_detail::MmvqTiling<Traits>;
  MmvqConfig c;
  c.tokens = static_cast<int>(m);
  c.math = math;
  const auto row_tiles = static_cast<unsigned>((n + Tiling::kRows - 1) / Tiling::kRows);
  if constexpr (HasInt8<Traits>::value) {
    static_assert(kMmvqInt8MaxTokens == 8, "token counts round up to 1, 2, 4 or 8");
    if (math == MmvqMath::kInt8) {
      const LaneGrid lanes = plan_lanes<Traits>(n, k, m, device);
      const auto activations = static_cast<size_t>(cuda_detail::int8_activation_bytes(m, k));
      if (lanes.fits) {
        c.kernel = MmvqKernel::kDp4a;
        c.kernel_tokens = lane_tokens(m);
        c.blocks = lanes.blocks, c.threads = lanes.threads, c.shared_bytes = lanes.smem;
        c.int8_prologue = m > 2;  // one or two tokens are quantized inside the kernel
        c.workspace_bytes = c.int8_prologue ? activations : 0;
        return c;
      }
      const int tokens = int8_tokens(m);
      const int warps = plan_int8_warps<Traits>(k, tokens, device);
      if (warps > 0) {
        c.kernel = MmvqKernel::kInt8TensorCores;
        c.kernel_tokens = tokens;
        c.blocks = row_tiles, c.threads = 32 * warps;
        c.shared_bytes = tokens == 1   ? cuda_detail::MmvqInt8Tiling<Traits, 1>::smem_bytes(warps)
                         : tokens == 2 ? cuda_detail::MmvqInt8Tiling<Traits, 2>::smem_bytes(warps)
                         : tokens == 4 ? cuda_detail::MmvqInt8Tiling<Traits, 4>::smem_bytes(warps)
                                       : cuda_detail::MmvqInt8Tiling<Traits, 8>::smem_bytes(warps);
        c.int8_prologue = true;
        c.workspace_bytes = activations;
        return c;
      }
    }
  }
  c.kernel = MmvqKernel::kBf16TensorCores;
  c.math = MmvqMath::kBf16;
  c.kernel_tokens = m <= 8 ? 8 : 16;
  c.blocks = row_tiles, c.threads = Tiling::kThreads;
  c.shared_bytes = Tiling::smem_bytes(m <= 8 ? 1 : 2);
  return c;
}

}  // namespace

void check_mmvq_pass(QuantType t, int64_t m, int64_t n, int64_t k, MmvqMath math) {
  weight_type_info(static_cast<int64_t>(t), "qtype");
  row_bytes(t, k, "k");
  LOWBIT_CHECK(n >= 0, "w: rows/N must be >= 0, got ", n);
  LOWBIT_CHECK(m >= 1 && m <= kMmvqMaxTokens, "x: MMVQ takes 1 to ", kMmvqMaxTokens, " tokens, got M = ", m);
  LOWBIT_CHECK(math == MmvqMath::kAuto || math == MmvqMath::kBf16 || math == MmvqMath::kInt8,
               "math: unknown MmvqMath value ", static_cast<int>(math));
  LOWBIT_CHECK(math != MmvqMath::kInt8 || mmvq_int8_supported(t, m), "math: int8 MMVQ serves M <= ", kMmvqInt8MaxTokens,
               " tokens of every type but mxfp8_e4m3; got ", type_name(t), " with M = ", m);
}

MmvqConfig plan_mmvq_pass(QuantType t, int64_t m, int64_t n, int64_t k, const DeviceFacts& device, MmvqMath math) {
  check_mmvq_pass(t, m, n, k, math);
  const MmvqMath run = resolve_mmvq_math(t, m, math);
  MmvqConfig c;
  visit_weight_type(t, [&](auto traits) { c = plan_pass<decltype(traits)>(n, k, m, run, device); });
  return c;
}

}  // namespace lowbit
