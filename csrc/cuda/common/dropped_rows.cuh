// Zeros in the output rows of the pairs a routing dropped (slot -1), for the MoE kernels that write
// only the routed pairs' rows: moe_batched given moe_align's pair slots (lowbit/cuda_moe.h).
#pragma once

#include <cstdint>

#include "cuda/common/store_float.cuh"
#include "lowbit/cpu.h"

namespace lowbit::cuda_detail {

// Whether the routing dropped this lane's pair among the first 32 of [first, last) (pair first +
// lane; false past last). A kernel reads it before its own loads, so that the slot's latency
// overlaps theirs, and hands it to zero_dropped_rows.
__device__ __forceinline__ bool lane_pair_dropped(const int32_t* slots, int64_t first, int64_t last) {
  const int64_t p = first + static_cast<int64_t>(threadIdx.x & 31);
  return p < last && __ldg(slots + p) < 0;
}

// Thread t of the `threads` that share pairs [first, last) writes columns t, t + threads, ... < n
// of each dropped pair's row of y (row stride in elements). Every lane of a warp calls it with the
// same pairs and its lane_pair_dropped; a ballot gives the warp the dropped ones, 32 pairs per
// load of each lane (eight loads per thread, one per pair, doubled the MoE permutation prologue at
// 4096 pairs: benchmarks/NOTES.md).
__device__ __forceinline__ void zero_dropped_rows(bool first_dropped, const int32_t* slots, int64_t first, int64_t last,
                                                  void* y, FloatType type, int64_t row_stride, int64_t n, int64_t t,
                                                  int64_t threads) {
  bool mine = first_dropped;
  for (int64_t base = first; base < last; base += 32) {
    if (base != first) mine = lane_pair_dropped(slots, base, last);
    uint32_t dropped = __ballot_sync(0xFFFFFFFFu, mine);
    while (dropped != 0) {
      const int d = __ffs(static_cast<int>(dropped)) - 1;
      dropped &= dropped - 1;
      for (int64_t c = t; c < n; c += threads) store_float_as(y, type, (base + d) * row_stride + c, 0.0f);
    }
  }
}

}  // namespace lowbit::cuda_detail
