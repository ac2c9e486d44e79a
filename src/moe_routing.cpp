// CPU reference of the MoE routing (include/lowbit/moe_routing.h).
#include "lowbit/moe_routing.h"

#include <vector>

#include "lowbit/error.h"
#include "lowbit/moe_policy.h"

namespace lowbit::cpu {

void moe_align(const int64_t* ids, int64_t pairs, int64_t experts, int64_t begin, int block_size, int32_t* sorted_pairs,
               int64_t capacity, int32_t* block_experts, int64_t blocks, int32_t* num_padded, int32_t* pair_slots) {
  LOWBIT_CHECK(experts >= 1 && experts <= kMoeMaxExperts, "num_experts: E = ", experts, " must be in [1, ",
               kMoeMaxExperts, "]");
  LOWBIT_CHECK(block_size >= 1, "block_size: must be >= 1, got ", block_size);
  LOWBIT_CHECK(pairs >= 0 && pairs < (int64_t{1} << 31) - experts * block_size, "topk_ids: ", pairs,
               " pairs do not fit the int32 sorted rows");
  LOWBIT_CHECK(capacity >= moe_sorted_capacity(pairs, experts, block_size), "sorted_pairs: ", capacity,
               " rows is less than pairs + E * (block_size - 1) = ", moe_sorted_capacity(pairs, experts, block_size));
  LOWBIT_CHECK(blocks * block_size >= capacity, "block_experts: ", blocks, " blocks do not cover ", capacity, " rows");
  LOWBIT_CHECK(pairs == 0 || (ids != nullptr && pair_slots != nullptr), "topk_ids/pair_slots: null pointer");
  std::vector<int64_t> count(static_cast<size_t>(experts), 0), offset(static_cast<size_t>(experts), 0);
  for (int64_t p = 0; p < pairs; ++p) {
    const int32_t e = moe_local_expert(ids[p], begin, experts);
    if (e >= 0) ++count[static_cast<size_t>(e)];
  }
  int64_t used = 0;
  for (int64_t e = 0; e < experts; ++e) {
    offset[static_cast<size_t>(e)] = used;
    const int64_t padded = (count[static_cast<size_t>(e)] + block_size - 1) / block_size * block_size;
    for (int64_t b = used / block_size; b < (used + padded) / block_size; ++b)
      block_experts[b] = static_cast<int32_t>(e);
    used += padded;
  }
  for (int64_t b = used / block_size; b < blocks; ++b) block_experts[b] = -1;
  for (int64_t r = 0; r < capacity; ++r) sorted_pairs[r] = static_cast<int32_t>(pairs);
  for (int64_t p = 0; p < pairs; ++p) {
    const int32_t e = moe_local_expert(ids[p], begin, experts);
    if (e < 0) {
      pair_slots[p] = -1;
      continue;
    }
    const int64_t slot = offset[static_cast<size_t>(e)]++;
    sorted_pairs[slot] = static_cast<int32_t>(p);
    pair_slots[p] = static_cast<int32_t>(slot);
  }
  *num_padded = static_cast<int32_t>(used);
}

}  // namespace lowbit::cpu
