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
// takes about three times the instructions (benchmarks/NOTES.md); in the grouped 48-token tile,
// half of the bytes take byte_perm lookups in registers instead (nibble_pairs_from_tables, below).
// Lane t takes bytes 4t .. 4t + 3, so decoded position 8t + 2i + h is weight 4t + i + 16h.
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

// bf16 bits of an integer of magnitude below 256 (exact: at most eight significant bits).
constexpr uint32_t bf16_of_small_int(int v) {
  if (v == 0) return 0;
  const uint32_t m = static_cast<uint32_t>(v < 0 ? -v : v);
  int e = 0;
  while ((m >> (e + 1)) != 0) ++e;  // m = 2^e (1 + f), f in 7 bits
  const uint32_t f = (m << (7 - e)) & 0x7Fu;
  return (v < 0 ? 0x8000u : 0u) | ((127u + static_cast<uint32_t>(e)) << 7) | f;
}
static_assert(bf16_of_small_int(1) == 0x3F80u && bf16_of_small_int(-127) == 0xC2FEu &&
                  bf16_of_small_int(113) == 0x42E2u && bf16_of_small_int(-10) == 0xC120u,
              "bf16 of small integers");

// The IQ4 codebook's bf16 values as byte tables for byte_perm lookups: word i of the low bytes
// (high: the high bytes) of entries 4i .. 4i + 3.
constexpr uint32_t iq4_bf16_byte_word(bool high, int i) {
  uint32_t w = 0;
  for (int j = 0; j < 4; ++j) {
    const uint32_t bits = bf16_of_small_int(static_cast<int8_t>(codebook::kKvaluesIq4nl[4 * i + j]));
    w |= ((high ? bits >> 8 : bits) & 0xFFu) << (8 * j);
  }
  return w;
}

// The pairs of code bytes 0 and 1 (word i: bf16 of byte i's low nibble's value, then its high
// nibble's) from the byte tables (lo, hi: iq4_bf16_byte_word): the four nibbles of the two bytes
// look up their low and their high bf16 bytes (nibble_lookup_i8's first word), then each pair is
// interleaved from its two nibbles' bytes.
LOWBIT_HD void nibble_pairs_from_tables(uint32_t codes, const uint32_t (&lo)[4], const uint32_t (&hi)[4],
                                        uint32_t (&pairs)[2]) {
  const uint32_t l = nibble_lookup_i8(codes, lo[0], lo[1], lo[2], lo[3]).q[0];
  const uint32_t u = nibble_lookup_i8(codes, hi[0], hi[1], hi[2], hi[3]).q[0];
  pairs[0] = byte_perm(l, u, 0x5140u);  // nibbles 0 and 1: low byte, then high byte of each
  pairs[1] = byte_perm(l, u, 0x7362u);
}

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
