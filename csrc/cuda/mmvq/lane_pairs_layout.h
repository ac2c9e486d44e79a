// Where the dp4a lane MMVQ's pairs mode (lane_pairs.cuh) puts its items and which activation rows
// a block reads, as plain C++ so that the grid planner (mmvq_tiling.h) sizes a block's shared
// memory as the kernel lays it out.
#pragma once

#include <cstdint>

namespace lowbit::cuda_detail {

// Rows (gated: outputs) an item of `rows` rows covers: gated, each output is a gate row and an up
// row.
constexpr int lane_item_span(bool gated, int rows) {
  return gated ? rows / 2 : rows;
}
// Items per pair of N rows: groups of `rows` rows, or gated (N = 2n': n' outputs) of rows / 2
// outputs.
constexpr int64_t lane_items_per_pair(int64_t n, bool gated, int rows) {
  const int64_t span = lane_item_span(gated, rows), covered = gated ? n / 2 : n;
  return (covered + span - 1) / span;
}

// The activation rows a run of items [begin, end) reads (end > begin): rows of its first to last
// pair, divided by x_pair_divisor. The planner counts in 64 bits; the kernel in 32 (items and the
// divisor are below 2^32 there: the launch), where a division costs far fewer instructions.
struct LaneBlockRows {
  int64_t first;
  int count;
};
template <class I>
constexpr LaneBlockRows lane_block_rows(I begin, I end, I per_pair, I divisor) {
  const I first = begin / per_pair / divisor, last = (end - 1) / per_pair / divisor;
  return {static_cast<int64_t>(first), static_cast<int>(last - first + 1)};
}
// The most rows any run of `run` items reads: it spans at most ceil((run - 1) / per_pair) + 1
// pairs, and P consecutive pairs at most ceil((P - 1) / divisor) + 1 rows (a run of one item: one).
constexpr int64_t lane_max_block_rows(int64_t run, int64_t per_pair, int64_t divisor, int64_t total_rows) {
  const int64_t pairs = (run - 1 + per_pair - 1) / per_pair + 1;
  const int64_t rows = (pairs - 1 + divisor - 1) / divisor + 1;
  return rows < total_rows ? rows : total_rows;
}

// The divisor of the pairs' activation rows as the kernel takes it (32 bits): one past the pairs
// maps every pair to row 0, as the number of pairs does.
constexpr int64_t lane_pair_divisor(int64_t divisor, int64_t pairs) {
  return divisor > pairs ? (pairs > 0 ? pairs : 1) : divisor;
}

// Where a team is in its run of items: item `group` of `pair` (group < per_pair) and the pair's
// activation row among the block's (pair / divisor - first_x_row). A team's items lie `teams`
// apart, so its pair moves on once per per_pair / teams of them and the divisions run only then,
// not for every item (NOTES.md, the MoE vector kernel's cursor). Items below 2^32 (the launch).
struct LaneCursor {
  uint32_t pair, group;
  int x_row;
};
constexpr LaneCursor lane_cursor(uint32_t item, uint32_t per_pair, uint32_t divisor, int first_x_row) {
  const uint32_t pair = item / per_pair;
  return {pair, item - pair * per_pair, static_cast<int>(pair / divisor) - first_x_row};
}
// The cursor `step` items on.
constexpr LaneCursor lane_next_item(LaneCursor c, uint32_t step, uint32_t per_pair, uint32_t divisor, int first_x_row) {
  c.group += step;
  if (c.group >= per_pair) {
    const uint32_t q = c.group / per_pair;
    c.pair += q;
    c.group -= q * per_pair;
    c.x_row = static_cast<int>(c.pair / divisor) - first_x_row;
  }
  return c;
}

}  // namespace lowbit::cuda_detail
