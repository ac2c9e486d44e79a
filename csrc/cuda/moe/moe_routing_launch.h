// Launchers of the MoE routing kernels (moe_routing.cu) and of the fused layer's small kernels
// (moe_layer_kernels.cu), called by the checked API (moe_api.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/common/pair_experts.h"
#include "lowbit/cpu.h"

namespace lowbit::cuda_detail {

// pair_experts[p] = experts.of(p): the table the routing kernels read.
void launch_pair_experts(const PairExperts& experts, int64_t pairs, int32_t* pair_experts, cudaStream_t stream);

// Pairs without routing scratch past this many: one kernel of one block (moe_routing.cu). Not
// measured against the four-kernel form yet; 4096 is 512 tokens at top-8.
inline constexpr int64_t kMoeOneBlockPairs = 4096;

// Groups the pairs by expert (moe_align's outputs). pair_experts: int32 [pairs] and
// segment_counts: int32 [ceil(pairs / kMoeRoutingSegment), experts], scratch that only routings
// of more than kMoeOneBlockPairs pairs use.
void launch_moe_routing(const PairExperts& experts, int64_t pairs, int block_size, int32_t* pair_experts,
                        int32_t* segment_counts, int32_t* sorted_pairs, int64_t capacity, int32_t* block_experts,
                        int64_t blocks, int32_t* num_padded, int32_t* pair_slots, cudaStream_t stream);

// Zeros in the rows of y [pairs, n] (row stride in elements, of type y_type) whose pair's slot is -1:
// the dropped pairs' outputs where a kernel writes only the routed ones.
void launch_zero_dropped_rows(const int32_t* pair_slots, int64_t pairs, void* y, FloatType y_type, int64_t y_row_stride,
                              int64_t n, cudaStream_t stream);

// x [tokens, hidden] (row stride in elements) in x_type -> bf16 [tokens, hidden] contiguous.
void launch_round_to_bf16(const void* x, FloatType x_type, int64_t tokens, int64_t hidden, int64_t x_row_stride,
                          uint16_t* out, cudaStream_t stream);

// out[t, h] = sum over k = 0..top_k-1 in order of weights[t, k] * down[t * top_k + k, h], pairs
// without a local expert skipped; out [tokens, hidden] contiguous in out_type.
void launch_moe_combine(const float* down, const float* weights, const PairExperts& experts, int64_t tokens,
                        int64_t top_k, int64_t hidden, void* out, FloatType out_type, cudaStream_t stream);

}  // namespace lowbit::cuda_detail
