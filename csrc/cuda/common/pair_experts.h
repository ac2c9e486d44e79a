// The MoE kernels' view of the router's expert ids (kept apart from the routing kernels so that
// the MMVQ pairs modes, the float vector kernel and the combine read them the same way).
#pragma once

#include <cstdint>

namespace lowbit::cuda_detail {

// Each routed pair's local expert, read from the router's ids where a pair's kernel needs it (no
// kernel of its own before): ids[p] - begin, or -1 (the pair gets exact zeros and reads no weight)
// where ids[p] is negative or that lies outside [0, experts). A table of local experts is ids with
// begin 0.
struct PairExperts {
  const void* ids = nullptr;  // int32, or int64 where int64
  bool int64 = false;
  int64_t begin = 0;
  int64_t experts = 0;
#ifdef __CUDACC__
  __device__ __forceinline__ int32_t of(int64_t pair) const {
    const int64_t id = int64 ? static_cast<const int64_t*>(ids)[pair] : static_cast<const int32_t*>(ids)[pair];
    if (id < 0) return -1;
    const int64_t e = id - begin;
    return e >= 0 && e < experts ? static_cast<int32_t>(e) : -1;
  }
#endif
};

}  // namespace lowbit::cuda_detail
