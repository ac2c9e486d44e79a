// The K order of MMQ's bf16 activations inside each 32-weight span: plain constexpr C++ that the
// prologue, the mainloop's decode and the planner's shared-memory plan (mmq_tiling.h) share.
#pragma once

#include "lowbit/formats/all.h"

namespace lowbit::cuda_detail {

// Position j (0..31) of a 32-weight span in the permuted activations holds decoded position
// mmq_permuted_source(j) of the span: the m16k16 fragment's k index 2t, 2t + 1 (step s) and
// 2t + 8, 2t + 9 of the two k16 steps a span makes are positions 8t + 4s + {0, 1} and
// 8t + 4s + {2, 3}, so lane (g, t) decodes positions [8t, 8t + 8). For most formats a decoded
// position is the weight of that index.
LOWBIT_HD constexpr int mmq_permuted_source(int j) {
  return 8 * ((j & 7) >> 1) + 4 * (j >> 4) + 2 * ((j >> 3) & 1) + (j & 1);
}

// The nibble formats decoded by pairs (IQ4_NL, IQ4_XS): a 32-weight run is 16 code bytes, byte j
// holding weight j (low nibble) and weight j + 16 (high nibble). One shared-memory lookup turns a
// byte into both weights as a bf16 pair, one A-fragment register, where the nibble-by-nibble decode
// takes about three times the instructions (benchmarks/NOTES.md). Lane t takes bytes 4t .. 4t + 3,
// so decoded position 8t + 2i + h is weight 4t + i + 16h.
LOWBIT_HD constexpr int nibble_pair_source(int d) {
  return 4 * (d >> 3) + ((d & 7) >> 1) + 16 * (d & 1);
}

// Whether MMQ's bf16 path decodes type Traits by nibble pairs.
template <class Traits>
inline constexpr bool kMmqNibblePairs = Traits::kType == QuantType::IQ4_NL || Traits::kType == QuantType::IQ4_XS;

// The pair table (nibble_pairs_bf16.cuh): 256 entries of two bf16 values (the low nibble's in the
// low half).
inline constexpr int kNibblePairTableBytes = 256 * 4;
// Copies of the pair table where a block has the shared memory for one per lane (mmq_tiling.h).
inline constexpr int kNibblePairCopies = 32;

// The weight of its span that position j of the bf16 activations holds.
template <bool kNibblePairs>
LOWBIT_HD constexpr int mmq_span_source(int j) {
  return kNibblePairs ? nibble_pair_source(mmq_permuted_source(j)) : mmq_permuted_source(j);
}

// Each order reads every weight of a span once.
template <bool kNibblePairs>
constexpr bool mmq_span_order_is_permutation() {
  bool seen[32] = {};
  for (int j = 0; j < 32; ++j) {
    const int w = mmq_span_source<kNibblePairs>(j);
    if (w < 0 || w >= 32 || seen[w]) return false;
    seen[w] = true;
  }
  return true;
}
static_assert(mmq_span_order_is_permutation<false>() && mmq_span_order_is_permutation<true>(), "a K order");

}  // namespace lowbit::cuda_detail
