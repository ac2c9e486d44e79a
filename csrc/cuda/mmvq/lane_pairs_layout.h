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
// pair, divided by x_pair_divisor.
struct LaneBlockRows {
  int64_t first;
  int count;
};
constexpr LaneBlockRows lane_block_rows(int64_t begin, int64_t end, int64_t per_pair, int64_t divisor) {
  const int64_t first = begin / per_pair / divisor, last = (end - 1) / per_pair / divisor;
  return {first, static_cast<int>(last - first + 1)};
}
// The most rows any run of `run` items reads: it spans at most ceil((run - 1) / per_pair) + 1
// pairs, and P consecutive pairs at most ceil((P - 1) / divisor) + 1 rows (a run of one item: one).
constexpr int64_t lane_max_block_rows(int64_t run, int64_t per_pair, int64_t divisor, int64_t total_rows) {
  const int64_t pairs = (run - 1 + per_pair - 1) / per_pair + 1;
  const int64_t rows = (pairs - 1 + divisor - 1) / divisor + 1;
  return rows < total_rows ? rows : total_rows;
}

}  // namespace lowbit::cuda_detail
