// MoE routing in the moe_align_block_size convention (vLLM, sgl-kernel): (token, k) pairs grouped
// by expert, each expert's run padded to a multiple of the block size. The CPU reference here; the
// CUDA routing (lowbit/cuda_moe.h) produces the same arrays, bit for bit.
//
//   pair p = token * top_k + k, its global expert id ids[p] and local expert e = ids[p] - begin;
//   pairs whose e is outside [0, E) are dropped (they contribute exact zeros).
//   sorted_pairs[capacity]: expert 0's pairs in increasing p, padded with the sentinel `pairs`
//     to a multiple of block_size, then expert 1's, ...; past num_padded, the sentinel.
//   block_experts[blocks]: the local expert of each block of block_size sorted rows, -1 past
//     num_padded (experts with no pair own no block: they cost nothing).
//   num_padded: the sorted rows in use.
//   pair_slots[pairs]: the row of sorted_pairs holding pair p, -1 for dropped pairs (the inverse
//     map: a combine over outputs written in sorted order reads them back through it).
#pragma once

#include <cstdint>

namespace lowbit {

// The local expert of global id `id` for a rank holding [begin, begin + experts), or -1.
// (constexpr: the CUDA kernels read ids through it too, csrc/cuda/common/pair_experts.h.)
constexpr int32_t moe_local_expert(int64_t id, int64_t begin, int64_t experts) {
  const int64_t e = id - begin;
  return (id >= 0 && e >= 0 && e < experts) ? static_cast<int32_t>(e) : -1;
}

namespace cpu {

// capacity = moe_sorted_capacity(pairs, experts, block_size); blocks = ceil(capacity / block_size).
void moe_align(const int64_t* ids, int64_t pairs, int64_t experts, int64_t begin, int block_size, int32_t* sorted_pairs,
               int64_t capacity, int32_t* block_experts, int64_t blocks, int32_t* num_padded, int32_t* pair_slots);

}  // namespace cpu
}  // namespace lowbit
