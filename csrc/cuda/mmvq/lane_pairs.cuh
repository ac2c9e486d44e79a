// The dp4a lane MMVQ's pairs mode (MmvqPairs in mmvq_args.h: the MoE vector projection). The
// kernel's items are (pair, row group): kRows consecutive rows of the pair's expert, or, gated, one
// output's gate row and up row. Block b takes the run of items_per_block items from
// b * items_per_block, pair-major, so that a block touches few pairs: it quantizes just their
// activation rows into its shared memory (lane_block_rows), and its teams take the run's items in
// turn. Where the run spans more pairs than the grid has blocks, the rows are many; the launch
// shortens the runs until they fit (launch_mmvq_lane_pairs).
#pragma once

#include <cstdint>

#include "cuda/mmvq/lane_pairs_layout.h"
#include "cuda/mmvq/mmvq_args.h"

namespace lowbit::cuda_detail {

// One item of the pairs mode: where its rows lie (row r = first + r * step of the expert at w),
// whether its pair has a local expert (else its outputs are zeros and it reads no weight) and the
// block's shared row of its activations. Items number fewer than 2^32 (checked at launch).
struct LaneItem {
  const uint8_t* w;
  const uint8_t* scales;
  int64_t first, step;
  int x_row;
  bool live;
};

template <bool kGated, int kRows>
__device__ __forceinline__ LaneItem lane_item(const MmvqPairArgs& a, uint32_t item, uint32_t per_pair,
                                              int first_x_row) {
  LaneItem it;
  const uint32_t pair = item / per_pair, group = item - pair * per_pair;
  const int32_t e = a.pairs.experts.of(pair);
  it.live = e >= 0;
  const int64_t expert = it.live ? e : 0;
  it.w = a.w + expert * a.pairs.w_expert_stride;
  it.scales = a.scales != nullptr ? a.scales + expert * a.pairs.scale_expert_stride : nullptr;
  it.first = kGated ? group : static_cast<int64_t>(group) * kRows;
  it.step = kGated ? a.n / 2 : 1;
  it.x_row = static_cast<int>(pair / static_cast<uint32_t>(a.pairs.x_pair_divisor)) - first_x_row;
  return it;
}

}  // namespace lowbit::cuda_detail
