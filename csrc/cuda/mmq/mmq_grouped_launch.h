// Seam between the MoE API (moe_api.cu, every architecture) and the grouped mode of the MMQ kernel
// (mmq_grouped_kernel.cuh, compiled for sm_90a alone in mmq_<family>_sm90a.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/mmq/mmq_tiling.h"
#include "cuda/moe/moe_launch.h"
#include "lowbit/quant_type.h"

namespace lowbit::cuda_detail {

// Routing block sizes the grouped kernel has a token tile for (visit_grouped_token_tile).
inline bool moe_grouped_mmq_block(int block_size) {
  return visit_grouped_token_tile(block_size, [](auto) {});
}

// Bytes of its workspace: the x rows a projection reads, bf16 in MMQ's K order ([rows, K rounded up
// to 256]), for `pairs` pairs at x_pair_divisor pairs per row; the int8 path's rows take less
// (mmq_activation_bytes).
inline int64_t moe_grouped_mmq_workspace_bytes(int64_t pairs, int64_t x_pair_divisor, int64_t k) {
  const int64_t rows = (pairs + x_pair_divisor - 1) / x_pair_divisor;
  const int64_t k_pad = (k + kMmqUnitElems - 1) / kMmqUnitElems * kMmqUnitElems;
  return rows * k_pad * 2;
}

// Launches the activation prologue (the bf16 permutation, or the int8 quantization where
// a.batched_int8) into `workspace` (256-byte aligned, of moe_grouped_mmq_workspace_bytes) and the
// grouped tiles on `stream`; a.block_size must satisfy moe_grouped_mmq_block (the caller checked
// the arguments).
template <QuantType T>
void launch_moe_grouped_mmq(const MoeProjArgs& a, uint8_t* workspace, cudaStream_t stream);

#define LOWBIT_INSTANTIATE_MOE_GROUPED_MMQ(Name) \
  template void launch_moe_grouped_mmq<QuantType::Name>(const MoeProjArgs&, uint8_t*, cudaStream_t);

}  // namespace lowbit::cuda_detail
