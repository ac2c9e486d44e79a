// The dp4a lane MMVQ's pairs mode (MmvqPairs in mmvq_args.h: the MoE vector projection). The
// kernel's items are (pair, row group): kRows consecutive rows of the pair's expert, or, gated,
// kRows / 2 consecutive outputs' gate rows and up rows (lane_pairs_shape). Block b takes the run
// of items_per_block items from b * items_per_block, pair-major, so that a block touches few
// pairs: it quantizes just their activation rows into its shared memory (lane_block_rows), and its
// teams take the run's items in turn. Where the run spans more pairs than the grid has blocks, the
// rows are many; the launch shortens the runs until they fit (launch_mmvq_lane_pairs).
#pragma once

#include <cstdint>

#include "cuda/mmvq/lane_pairs_layout.h"
#include "cuda/mmvq/mmvq_args.h"

namespace lowbit::cuda_detail {

// One item of the pairs mode: where its rows lie (rows first.. of the expert at w; gated, outputs
// first.., output o's gate row o and up row o + step), whether its pair has a local expert (else
// its outputs are zeros and it reads no weight) and the block's shared row of its activations.
// Items number fewer than 2^32 (checked at launch).
struct LaneItem {
  const uint8_t* w;
  const uint8_t* scales;
  int64_t first, step, limit;  // limit: the rows (gated: outputs) of the expert
  int x_row;
  int expert;  // local expert (0 where not live)
  bool live;
};

// The cursor (lane_pairs_layout.h) of item `item` and the one `step` items on, with the divisor
// of the pairs' activation rows from the launch (below 2^32: launch_moe_vec_int8 clamps it,
// lane_pair_divisor).
__device__ __forceinline__ LaneCursor lane_cursor(const MmvqPairArgs& a, uint32_t item, uint32_t per_pair,
                                                  int first_x_row) {
  return lane_cursor(item, per_pair, static_cast<uint32_t>(a.pairs.x_pair_divisor), first_x_row);
}
__device__ __forceinline__ LaneCursor lane_next_item(const MmvqPairArgs& a, LaneCursor c, uint32_t step,
                                                     uint32_t per_pair, int first_x_row) {
  return lane_next_item(c, step, per_pair, static_cast<uint32_t>(a.pairs.x_pair_divisor), first_x_row);
}

template <bool kGated, int kRows>
__device__ __forceinline__ LaneItem lane_item(const MmvqPairArgs& a, const LaneCursor& c) {
  LaneItem it;
  const int32_t e = a.pairs.experts.of(c.pair);
  it.live = e >= 0;
  const int64_t expert = it.live ? e : 0;
  it.expert = static_cast<int>(expert);
  it.w = a.w + expert * a.pairs.w_expert_stride;
  it.scales = a.scales != nullptr ? a.scales + expert * a.pairs.scale_expert_stride : nullptr;
  it.first = static_cast<int64_t>(c.group) * lane_item_span(kGated, kRows);
  it.step = kGated ? a.n / 2 : 0;
  it.limit = kGated ? a.n / 2 : a.n;
  it.x_row = c.x_row;
  return it;
}

// Row r of an item (r < kRows; gated: r < kRows / 2 the gate rows, then the up rows). Rows past the
// expert's end (the last item only) read row 0 and are never stored.
template <bool kGated, int kRows>
__device__ __forceinline__ int64_t lane_item_row(const LaneItem& it, int r) {
  constexpr int kSpan = lane_item_span(kGated, kRows);
  const int64_t o = it.first + r % kSpan;
  return o < it.limit ? o + (r / kSpan) * it.step : 0;
}

}  // namespace lowbit::cuda_detail
