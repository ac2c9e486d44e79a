// The rows of the per-architecture tuning tables (tuning/sm90.h, ...): plain constexpr data that
// the kernels read at compile time and the planner (src/) reads at run time, so that both agree.
// A row names the weight type it tunes (kAnyType: every type not named before it) and where its
// numbers were measured (Provenance).
#pragma once

#include "lowbit/quant_type.h"

namespace lowbit::tuning {

// Where a row's numbers come from: the GPU, the commit measured and the date; the measurements
// themselves are in benchmarks/NOTES.md and benchmarks/results/.
struct Provenance {
  const char* gpu;
  const char* commit;
  const char* date;
};

inline constexpr QuantType kAnyType{0};

// How the dp4a lane MMVQ (mmvq/lane_kernel.cuh) runs a format for `tokens` tokens: a team of
// team_warps warps works on `rows` rows at a time, splitting K (thread i of the team takes
// sub-blocks i, i + 32 team_warps, ...). rows == 0: the tensor-core kernel is faster there.
struct LaneShape {
  int rows;
  int team_warps;
  bool pairs;                // a thread takes two sub-blocks per step, their loads in flight together
  bool whole_sub = true;     // decode through the format's whole-sub-block read where it has one
  bool split_signs = false;  // one token, grid formats (grid_i8): signs as a second dp4a
  // Without pairs, the per-round prefetch through a select instead of a branch (a branch can have
  // ptxas rebuild the row pointers for the prefetch each round).
  bool select_prefetch = false;
  // How many rounds past a step's first round the thread's lines are started into L2 (0: none);
  // with pairs, 1 is the pair's second sub-block, 2 the next pair's first.
  int prefetch_ahead = 1;
  // Read the blocks as aligned words (the format's lane words) where it has them and the rows allow.
  bool words = true;
  // The grid table's cap in KB (0: the format's, kGridCopies): fewer copies build faster where the
  // build is on each call's chain (one token) and the lookups are few.
  int table_kb = 0;
  // With split_signs, formats whose signs are seven-bit codes (the eighth their parity): the two
  // byte masks of a group's code from a shared table (one LDS.64), not from its parity and spreads.
  bool sign_table = false;
  // Pairs modes, one-warp teams: each round's rows copied into a ring of two stages of shared
  // memory by a tensor copy (cp.async.bulk.tensor) one round ahead (the next item's first round during
  // this item's last), so that a warp's next loads are in flight while it decodes, holding no
  // registers.
  bool staged = false;
};

// How the lane MMVQ's pairs modes (the MoE vector projection, one token per pair;
// mmvq/lane_pairs.cuh) split a type's work: items of `rows` rows (gated: rows / 2 outputs, each its
// gate row and its up row) for teams of team_warps warps, the lines prefetch_ahead rounds on
// started into L2, one sub-block per lane and round (select_prefetch off), or two sub-blocks per
// step with their loads in flight together where paired_rounds is set (LaneShape's pairs).
// The decode choices (whole_sub, split_signs, words) stay the type's one-token ones, but for
// sign_table, which each split sets. A type may have a second split for few items
// (kLanePairsFewRows): smaller items, more warps in flight, where they still fit one wave of
// teams (mmvq_tiling.h, lane_pairs_few).

// Which of the lane kernel's two instantiations a row applies to: the one reading aligned words
// (kWords true), the one reading bytes, or both.
enum class WordsKernel : int { kBoth, kWordsOnly, kBytesOnly };

// paired_in: the instances that take paired rounds (the bytes instance may spill with them while
// the words instance does not; only rows and teams must agree between the two).
struct LanePairsRow {
  QuantType type;
  int rows;
  int team_warps;
  int prefetch_ahead;
  const Provenance* measured;
  bool paired_rounds = false;
  WordsKernel paired_in = WordsKernel::kBoth;
  int table_kb = 0;  // LaneShape's
  // LaneShape's sign_table, for this split (the type's one-token row decides it for the dense
  // kernel only): where the table's build on the chain costs more than its lookups save, off.
  bool sign_table = false;
  bool staged = false;  // LaneShape's
};

// The lane MMVQ reads its grid copy through an address the compiler cannot see into
// (replicated_int8_codebooks) but in the instances a row names (plain_in), which spilled with it.
struct LaneGridAddressRow {
  QuantType type;
  WordsKernel plain_in;
  const Provenance* measured;
};

struct LaneRow {
  QuantType type;
  int tokens;  // 1, 2, or 4 (the kernel of three or four tokens)
  WordsKernel applies;
  LaneShape shape;
  const Provenance* measured;
};

// The dequantize kernel's per-type shape (dequant/dequant_kernel.cuh): groups of eight weights
// per thread and row (1 or 2, of one block), and whether it decodes through the int8 form.
struct DequantRow {
  QuantType type;
  int groups;
  bool via_int8;
  const Provenance* measured;
};

// The dense dispatcher's MMVQ limit: MMVQ (in passes of kMmvqMaxTokens tokens) beats dequantize +
// bf16 GEMM up to max_tokens on GPUs of this major architecture (0: any not named before).
struct MmvqLimitRow {
  int compute_major;
  QuantType type;
  int max_tokens;
  const Provenance* measured;  // nullptr: not measured, a conservative default
};

// The dense dispatcher's MMQ range: MMQ beats MMVQ (in passes) and dequantize + bf16 GEMM for
// min_tokens <= M <= max_tokens on GPUs of this major architecture that run the MMQ kernels; for
// weights of fewer than short_k values per row only up to short_k_max_tokens (there the decode
// to bf16 is cheap next to the GEMM, and a row tile's K too short to fill MMQ's pipeline).
struct MmqRangeRow {
  int compute_major;
  int min_tokens, max_tokens;
  int64_t short_k;
  int short_k_max_tokens;
  const Provenance* measured;
};

// Where MMQ's int8 path (math auto) replaces its bf16 one: type at token tiles up to max_tile (the
// dense kernel and the grouped MoE kernel share the mainloop). dense_min_tokens > 0: the dense
// dispatcher runs it from that many tokens on, below MMQ's common range (where MMVQ runs else).
struct MmqInt8Row {
  QuantType type;
  int max_tile;
  int dense_min_tokens;
  const Provenance* measured;
};

// The MoE planner's vector limit on GPUs of this major architecture. Where the MoE vector kernel hands over to the
// batched one: from batched_pairs_per_expert routed pairs per local expert (the vector kernel reads an expert once per
// pair, the batched one once per routing block, so their ratio follows the pairs per expert rather than the token
// count), the vector kernel's token limit held within [min_tokens, max_tokens] (the measured span).
struct MoeVectorLimitRow {
  int compute_major;
  int batched_pairs_per_expert;
  int min_tokens;
  int max_tokens;
  const Provenance* measured;
};

}  // namespace lowbit::tuning
