// The tuning the kernels and the planner read: per (type, token count) shapes and the dispatcher's
// limits, looked up in the architecture's table. Only sm_90 (H200) has been measured; every
// architecture reads its rows until a table of its own is added here (the kernels then take the
// architecture as a template argument so that host and device read the same row).
#pragma once

#include "cuda/tuning/sm90.h"

namespace lowbit::tuning {

// The lane MMVQ's shape for `tokens` tokens of type t, for the kernel reading aligned words or
// bytes; rows == 0 where the tensor-core kernels serve.
constexpr LaneShape lane_shape(QuantType t, int tokens, bool words = true) {
  for (const LaneRow& row : sm90::kLaneRows) {
    const bool type = row.type == t || row.type == kAnyType;
    const bool kernel = row.applies == WordsKernel::kBoth || (row.applies == WordsKernel::kWordsOnly) == words;
    if (type && row.tokens == tokens && kernel) return row.shape;
  }
  return {0, 0, false};
}

// The lane MMVQ's pairs-mode split for type t: its common one, or (few) the one for few items where
// the type has one.
constexpr LanePairsRow lane_pairs_split(QuantType t, bool few = false) {
  if (few)
    for (const LanePairsRow& row : sm90::kLanePairsFewRows)
      if (row.type == t || row.type == kAnyType) return row;
  for (const LanePairsRow& row : sm90::kLanePairsRows)
    if (row.type == t || row.type == kAnyType) return row;
  return {t, 2, 1, 1, nullptr};
}

// Whether the lane MMVQ of type t, reading aligned words or bytes, reads its grid copy through an
// opaque address (kLaneGridPlainAddressRows).
constexpr bool lane_grid_opaque_copy(QuantType t, bool words) {
  for (const LaneGridAddressRow& row : sm90::kLaneGridPlainAddressRows)
    if (row.type == t && (row.plain_in == WordsKernel::kBoth || (row.plain_in == WordsKernel::kWordsOnly) == words))
      return false;
  return true;
}

constexpr DequantRow dequant_row(QuantType t) {
  for (const DequantRow& row : sm90::kDequantRows)
    if (row.type == t || row.type == kAnyType) return row;
  return {t, 1, false, nullptr};
}

// Largest M for which MMVQ serves type t on a GPU of this major architecture; `measured` is set
// to the row's provenance (nullptr: the conservative default of a GPU never measured).
constexpr int mmvq_max_tokens(QuantType t, int compute_major, const Provenance** measured = nullptr) {
  for (const MmvqLimitRow& row : sm90::kMmvqLimitRows)
    if (row.compute_major == compute_major && (row.type == t || row.type == kAnyType)) {
      if (measured != nullptr) *measured = row.measured;
      return row.max_tokens;
    }
  if (measured != nullptr) *measured = nullptr;
  return 8;  // not measured: stay where one pass is surely ahead
}

// Whether MMQ serves M tokens on a GPU of this major architecture that runs its kernels.
constexpr bool mmq_serves(int64_t m, int64_t k, int compute_major) {
  for (const MmqRangeRow& row : sm90::kMmqRangeRows)
    if (row.compute_major == compute_major)
      return m >= row.min_tokens && m <= (k < row.short_k ? row.short_k_max_tokens : row.max_tokens);
  return false;
}

// Whether MMQ (sm_90a) runs type t's `tile`-token tiles on its int8 path when the caller leaves
// the arithmetic to lowbit.
constexpr bool mmq_int8_by_default(QuantType t, int tile) {
  for (const MmqInt8Row& row : sm90::kMmqInt8Rows)
    if (row.type == t) return tile <= row.max_tile;
  return false;
}

// The smallest M the dense dispatcher runs type t on MMQ's int8 path (math auto) when that lies below
// MMQ's common range; 0 where none does.
constexpr int mmq_int8_dense_min_tokens(QuantType t) {
  for (const MmqInt8Row& row : sm90::kMmqInt8Rows)
    if (row.type == t) return row.dense_min_tokens;
  return 0;
}

// The MoE vector limit's tuning row of a GPU of this major architecture; nullptr where never
// measured.
constexpr const MoeVectorLimitRow* moe_vector_limit_row(int compute_major) {
  for (const MoeVectorLimitRow& row : sm90::kMoeVectorLimitRows)
    if (row.compute_major == compute_major) return &row;
  return nullptr;
}

// The most tokens the MoE vector kernel serves for `experts` local experts and top_k (>= 1): where
// measured, the tokens whose pairs stay below the row's pairs per expert, held within the token
// counts the rows were measured between (the vector kernel ahead at 8 tokens in every measured
// shape, the batched one at 128); elsewhere the provisional 16 tokens (a batched block then holds
// about one pair at E = 128, top-8). With expert parallelism the pairs count those routed to other
// ranks too, so the limit errs towards the batched kernel, which leaves them out of its routing.
constexpr int64_t moe_vector_max_tokens(int compute_major, int64_t experts, int64_t top_k) {
  const MoeVectorLimitRow* row = moe_vector_limit_row(compute_major);
  if (row == nullptr) return 16;
  const int64_t by_pairs = (row->batched_pairs_per_expert * experts - 1) / top_k;
  return by_pairs < row->min_tokens ? row->min_tokens : (by_pairs > row->max_tokens ? row->max_tokens : by_pairs);
}

}  // namespace lowbit::tuning
