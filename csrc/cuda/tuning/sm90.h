// Tuning measured on sm_90 (H200): the dp4a lane MMVQ's shape per type and token count, the
// dequantize kernel's groups per thread, and the dense dispatcher's MMVQ limit. Each row says
// where it was measured; the timings behind it are in benchmarks/NOTES.md (the section named in
// its comment). Architectures never measured run these rows (tuning/tuning.h).
#pragma once

#include "cuda/tuning/tuning_types.h"

namespace lowbit::tuning::sm90 {

// N = 4096, K = 14336 A/B runs of the lane MMVQ (benchmarks/NOTES.md, "dp4a lanes ..." sections).
inline constexpr Provenance kOneToken{"H200", "0dd33f8", "2026-11-29"};   // prefetch 77386ae, split signs 7b0fc23
inline constexpr Provenance kTwoTokens{"H200", "9c32f8d", "2026-11-30"};  // select prefetch 2bfc9cc
inline constexpr Provenance kFourTokens{"H200", "6a6b582", "2026-11-30"};
inline constexpr Provenance kDequant20261129{"H200", "fd44737", "2026-11-29"};  // one group: f712dc3
inline constexpr Provenance kDense20261129{"H200", "02d83ef", "2026-11-29"};

using Q = QuantType;
using W = WordsKernel;

// LaneShape fields: rows, team_warps, pairs, whole_sub, split_signs, select_prefetch,
// prefetch_ahead, words. Per (type, tokens) the first matching row applies; none: tensor cores.
inline constexpr LaneRow kLaneRows[] = {
    // One token. Pairs where ptxas keeps the loop unspilled and the grid formats gain (IQ3_XXS
    // spills without them); prefetch: none for IQ4_XS, IQ4_NL, IQ1_M, the next pair for the grid
    // formats, the pair's second sub-block for IQ3_XXS (NOTES.md, "prefetch ahead").
    {Q::IQ4_XS, 1, W::kBoth, {1, 1, true, true, false, false, 0, /*words=*/false}, &kOneToken},
    {Q::IQ4_NL, 1, W::kBoth, {2, 2, false, true, false, false, 0}, &kOneToken},
    {Q::IQ1_M, 1, W::kBoth, {2, 2, true, true, false, false, 0}, &kOneToken},
    {Q::IQ1_S, 1, W::kBoth, {2, 2, true, true, false, false, 2}, &kOneToken},
    // split signs (NOTES.md, "split signs"): IQ2_XXS and IQ3_XXS gain, IQ2_XS and IQ2_S do not;
    // IQ2_XXS's masks from the sign-code table (NOTES.md, "the sign-mask table": measured at
    // 4bb82b9, 2026-12-04; IQ3_XXS's lost at one token)
    {Q::IQ2_XXS, 1, W::kBoth, {2, 2, true, true, true, false, 2, true, 0, /*sign_table=*/true}, &kOneToken},
    {Q::IQ2_XS, 1, W::kBoth, {2, 2, true, true, false, false, 2}, &kOneToken},
    {Q::IQ2_S, 1, W::kBoth, {2, 2, true, true, false, false, 2}, &kOneToken},
    {Q::IQ3_XXS, 1, W::kBoth, {2, 2, true, true, true, false, 1}, &kOneToken},
    // IQ3_S through words in pairs with split signs (NOTES.md, "IQ3_S steps"); from bytes the
    // plain shape (whole blocks in pairs spilled)
    {Q::IQ3_S, 1, W::kWordsOnly, {2, 2, true, true, true, false, 2}, &kOneToken},
    {kAnyType, 1, W::kBoth, {2, 2, false, true, false, false, 1}, &kOneToken},
    // Two tokens: IQ3_S and Q8_0 stay on tensor cores; IQ4_XS one row per warp in pairs
    {Q::IQ4_XS, 2, W::kBoth, {1, 1, true}, &kTwoTokens},
    {Q::IQ3_S, 2, W::kBoth, {0, 0, false}, &kTwoTokens},
    {Q::Q8_0, 2, W::kBoth, {0, 0, false}, &kTwoTokens},
    {Q::IQ1_M, 2, W::kBoth, {2, 2, false, true, false, /*select_prefetch=*/true}, &kTwoTokens},
    {Q::IQ2_S, 2, W::kBoth, {2, 2, false, true, false, false, 1, /*words=*/false}, &kTwoTokens},
    {Q::IQ2_XXS, 2, W::kBoth, {2, 2, true}, &kTwoTokens},
    {Q::IQ2_XS, 2, W::kBoth, {2, 2, true}, &kTwoTokens},
    {kAnyType, 2, W::kBoth, {2, 2, false}, &kTwoTokens},
    // Three or four tokens (activations from the prologue): one row per warp; MXFP4 and Q8_0 stay
    // on tensor cores (MXFP4_SPLIT unmeasured, with them); IQ4_XS without lane words (it spills)
    {Q::MXFP4, 4, W::kBoth, {0, 0, false}, &kFourTokens},
    {Q::Q8_0, 4, W::kBoth, {0, 0, false}, &kFourTokens},
    {Q::MXFP4_SPLIT, 4, W::kBoth, {0, 0, false}, nullptr},
    {Q::IQ4_XS, 4, W::kBoth, {1, 1, true, true, false, false, 1, /*words=*/false}, &kFourTokens},
    {Q::IQ1_M, 4, W::kBoth, {1, 1, true}, &kFourTokens},
    {kAnyType, 4, W::kBoth, {1, 1, false}, &kFourTokens},
};

// The pairs modes: a pair's row is short (K = 2048 is two rounds of one warp), so with the dense
// one-token shapes the per-item work (the pair's expert, row pointers, warp sums, store) weighs
// about as much as the decode; four rows per item keep four loads in flight per lane. IQ1_M and
// Q5_0 spilled at four rows: two, not measured (NOTES.md, "MoE vector items of four rows").
// Paired rounds won for IQ4_NL and IQ2_XXS, lost for IQ4_XS; the other formats spilled with them at
// four rows (NOTES.md, "whole MMQ units and paired rounds"; at two rows they serve few items, below).
inline constexpr Provenance kMoePairs20261201{"H200", "d7cd5a6", "2026-12-01"};         // against cf7270e
inline constexpr Provenance kMoePairedRounds20261202{"H200", "76bc916", "2026-12-02"};  // against 2759a48
// The split signs' masks from the sign-code table (LaneShape's sign_table) in the common split of
// IQ2_XXS and IQ3_XXS, not in their splits for few items, where the table's build is on one
// token's chain (NOTES.md, "the sign-mask table").
inline constexpr Provenance kMoeSignTable20261204{"H200", "4bb82b9", "2026-12-04"};
// IQ4_XS's rounds staged through shared memory (LaneShape's staged: copies a round ahead, across
// items too), which hide the weight loads' latency that paired rounds could not for it without
// spilling (NOTES.md, "staged rounds for IQ4_XS"; since "tensor-map copies", one copy per stage
// unit, which gained again).
inline constexpr Provenance kMoeStagedRounds20261204{"H200", "8a0d2b0", "2026-12-04"};  // against 19527da
// IQ2_XXS's staged in units of two rounds (its 264-byte round is not whole 16-byte units), with
// the sign-mask table of kMoeSignTable20261204 (NOTES.md, "staged units for IQ2_XXS").
inline constexpr Provenance kMoeStagedUnits20261204{"H200", "7a10b81", "2026-12-04"};  // against 09ce5a2
inline constexpr LanePairsRow kLanePairsRows[] = {
    {Q::IQ4_XS, 4, 1, 1, &kMoeStagedRounds20261204, false, W::kBoth, 0, false, /*staged=*/true},
    {Q::IQ4_NL, 4, 1, 2, &kMoePairedRounds20261202, /*paired_rounds=*/true},
    // IQ2_XXS's rounds staged, two to a 528-byte stage unit
    {Q::IQ2_XXS, 4, 1, 2, &kMoeStagedUnits20261204, /*paired_rounds=*/true, W::kBoth, 0, /*sign_table=*/true,
     /*staged=*/true},
    {Q::IQ3_XXS, 4, 1, 1, &kMoeSignTable20261204, false, W::kBoth, 0, /*sign_table=*/true},
    {Q::IQ1_M, 2, 1, 1, nullptr},
    {Q::Q5_0, 2, 1, 1, nullptr},
    {kAnyType, 4, 1, 1, &kMoePairs20261201},
};

// The pairs modes with few items (lane_pairs_few: where the split's items fit one wave of teams, a
// block of 32 per SM): a moe_proj of E = 128, N = 768 at one token is 8 pairs, 1536 four-row items,
// 12 teams on each SM; items of two rows put twice the warps in flight (NOTES.md, "few items").
// IQ1_M and Q5_0 have two-row items anyway; IQ4_XS without paired rounds, which lost at four rows;
// IQ2_S, IQ3_XXS, IQ3_S and IQ1_S with them in the aligned-words instance only (the byte-reading
// one, for rows of an odd number of blocks, spilled 4-108 bytes).
inline constexpr Provenance kMoeFewPairs20261202{"H200", "a19b56b", "2026-12-02"};  // against 79fc838
inline constexpr Provenance kMoeFewWords20261202{"H200", "1264c09", "2026-12-02"};  // against fd96ac3
inline constexpr LanePairsRow kLanePairsFewRows[] = {
    {Q::IQ2_XXS, 2, 1, 2, &kMoeFewPairs20261202, /*paired_rounds=*/true},
    {Q::IQ2_XS, 2, 1, 2, &kMoeFewPairs20261202, /*paired_rounds=*/true, W::kBoth, /*table_kb=*/32},
    {Q::IQ2_S, 2, 1, 2, &kMoeFewWords20261202, /*paired_rounds=*/true, W::kWordsOnly, /*table_kb=*/32},
    {Q::IQ3_XXS, 2, 1, 2, &kMoeFewWords20261202, /*paired_rounds=*/true, W::kWordsOnly},
    {Q::IQ3_S, 2, 1, 2, &kMoeFewWords20261202, /*paired_rounds=*/true, W::kWordsOnly},
    {Q::IQ1_S, 2, 1, 2, &kMoeFewWords20261202, /*paired_rounds=*/true, W::kWordsOnly},
    {Q::IQ4_NL, 2, 1, 2, &kMoeFewPairs20261202, /*paired_rounds=*/true},
    {Q::IQ4_XS, 2, 1, 1, &kMoeFewPairs20261202},
};

// The grid copy through an opaque address, everywhere but IQ2_XXS's byte-reading instances: their
// four-row pairs items spilled with it (NOTES.md, "the grid copy's address").
inline constexpr Provenance kLaneGridAddress20261203{"H200", "50c02d7", "2026-12-03"};  // against 8c996ac
inline constexpr LaneGridAddressRow kLaneGridPlainAddressRows[] = {
    {Q::IQ2_XXS, W::kBytesOnly, &kLaneGridAddress20261203},
};

// One group per thread where two groups of a block share nothing worth building once (or the
// int8 form's stores fill whole sectors); two elsewhere (NOTES.md, "dequantize").
inline constexpr DequantRow kDequantRows[] = {
    {Q::IQ4_XS, 1, /*via_int8=*/true, &kDequant20261129},
    {Q::IQ4_NL, 1, /*via_int8=*/true, &kDequant20261129},
    {Q::MXFP8_E4M3, 1, false, &kDequant20261129},
    {Q::Q8_0, 1, false, &kDequant20261129},
    {Q::IQ1_S, 1, false, &kDequant20261129},
    {Q::IQ3_XXS, 1, false, &kDequant20261129},
    {Q::IQ2_XXS, 1, false, &kDequant20261129},
    {kAnyType, 2, false, &kDequant20261129},
};

// Two MMVQ passes still beat dequantize + cuBLAS at 32 tokens for every type, three would lose
// (NOTES.md, "Dispatcher thresholds").
inline constexpr MmvqLimitRow kMmvqLimitRows[] = {
    {9, kAnyType, 32, &kDense20261129},
};

// MMQ against MMVQ and dequantize + cuBLAS, the nine I-quants: MMVQ ahead up to 16 tokens (but where
// MMQ's int8 path is, kMmqInt8Rows' dense_min_tokens), MMQ from 17 to 128, cuBLAS from 512; 129 to
// 511 not measured, cuBLAS keeps them. Below short_k the decode to bf16 is cheap next to the GEMM
// and a row tile has too few units of K to split across idle multiprocessors, so cuBLAS leads from
// 64 tokens; only K = 1024 was measured there (NOTES.md, "Step 2026-12-02 (56d94f1..d47967e)").
inline constexpr Provenance kMmqRange20261202{"H200", "85a50ee", "2026-12-02"};
inline constexpr MmqRangeRow kMmqRangeRows[] = {
    {9, 17, 128, 4096, 32, &kMmqRange20261202},
};

// MMQ's int8 path against its bf16 path: the nibble formats' int8 decode saves the bf16 render
// at 16- and 32-token tiles; from 64 tokens, and for the grid formats from 32, the float32 scaling
// of every 32-weight run costs more than it saves (NOTES.md, "the int8 path of MMQ").
inline constexpr Provenance kMmqInt8_20261202{"H200", "0b77c99", "2026-12-02"};
// The grid formats gain a little at 16-token tiles, dense and grouped, and lose from 32 on. The
// nibble formats' dense_min_tokens: from 9 tokens their int8 MMQ is ahead of the MMVQ that served
// there, both nearly flat in M (NOTES.md, "Step 2026-12-02 (dcd4a97..f3c7008)").
inline constexpr Provenance kMmqInt8From9{"H200", "ed2c210", "2026-12-02"};
inline constexpr MmqInt8Row kMmqInt8Rows[] = {
    {Q::IQ4_XS, 32, 9, &kMmqInt8From9},      {Q::IQ4_NL, 32, 9, &kMmqInt8From9},
    {Q::IQ1_S, 32, 9, &kMmqInt8From9},       {Q::IQ2_XXS, 16, 0, &kMmqInt8_20261202},
    {Q::IQ3_XXS, 16, 0, &kMmqInt8_20261202}, {Q::IQ3_S, 16, 0, &kMmqInt8_20261202},
};

// The vector path (the lane kernel's pairs modes, items of four rows) against the grouped MMQ
// (moe_proj E=128, top-8, N=768, K=2048 for iq2_xxs, iq3_s, iq4_xs; moe_layer Qwen3-30B-A3B and
// DeepSeek-like, E=256): the vector kernel reads an expert once per pair, the batched one once per
// routing block, so the pairs per local expert decide: the vector kernel leads at one, the batched
// one from two (NOTES.md, "Step 2026-12-02 (dcd4a97..f3c7008)").
inline constexpr Provenance kMoeVectorLimit20261202{"H200", "9f8b626", "2026-12-02"};
inline constexpr MoeVectorLimitRow kMoeVectorLimitRows[] = {
    {9, 2, /*min_tokens=*/8, /*max_tokens=*/64, &kMoeVectorLimit20261202},
};

}  // namespace lowbit::tuning::sm90
