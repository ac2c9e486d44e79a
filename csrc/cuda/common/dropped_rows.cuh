// Zeros in the output rows of the pairs a routing dropped (slot -1), for the MoE kernels that write
// only the routed pairs' rows: moe_batched given moe_align's pair slots (lowbit/cuda_moe.h).
#pragma once

#include <cstdint>

#include "cuda/common/store_float.cuh"
#include "lowbit/cpu.h"

namespace lowbit::cuda_detail {

// Thread t of the `threads` that share pairs [first, last) writes columns t, t + threads, ... < n
// of each dropped pair's row of y (row stride in elements). The slots come 32 at a time into a
// mask before any store, so that their loads are in flight together (a store between two loads
// would keep the compiler from moving the second ahead of it).
__device__ __forceinline__ void zero_dropped_rows(const int32_t* slots, int64_t first, int64_t last, void* y,
                                                  FloatType type, int64_t row_stride, int64_t n, int64_t t,
                                                  int64_t threads) {
  for (int64_t base = first; base < last; base += 32) {
    const int count = last - base < 32 ? static_cast<int>(last - base) : 32;
    uint32_t dropped = 0;
    for (int d = 0; d < count; ++d) dropped |= static_cast<uint32_t>(__ldg(slots + base + d) < 0) << d;
    while (dropped != 0) {
      const int d = __ffs(static_cast<int>(dropped)) - 1;
      dropped &= dropped - 1;
      for (int64_t c = t; c < n; c += threads) store_float_as(y, type, (base + d) * row_stride + c, 0.0f);
    }
  }
}

}  // namespace lowbit::cuda_detail
