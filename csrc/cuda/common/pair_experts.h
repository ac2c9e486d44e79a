// The MoE kernels' view of the router's expert ids: the MMVQ pairs modes, the float vector kernel,
// the routing and the combine map them through lowbit::moe_local_expert, as the CPU reference does.
#pragma once

#include <cstdint>

#include "lowbit/moe_routing.h"

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
    return moe_local_expert(id, begin, experts);
  }
#endif
};

}  // namespace lowbit::cuda_detail
