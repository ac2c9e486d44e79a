// The lane MMVQ's pairs-mode grid (csrc/cuda/mmvq/mmvq_tiling.h, lane_pairs_layout.h): the runs of
// items cover every item once, every block's activation rows fit the shared memory the grid asks
// for, and the grid declines where not even a run of one item fits (the tensor-core pairs kernel
// serves there); the kernel's own arithmetic (the block's rows in 32 bits, each team's walk by its
// cursor) gives what the divisions do. Plain C++: the kernel uses the same functions.
#include <gtest/gtest.h>

#include <cstdint>

#include "cuda/mmvq/mmvq_tiling.h"
#include "lowbit/formats/all.h"

namespace lowbit::cuda_detail {
namespace {

DeviceFacts h200() {
  DeviceFacts d;
  d.compute_major = 9;
  d.multiprocessors = 132;
  d.shared_per_block_optin = 232448;
  d.shared_per_sm = 233472;
  return d;
}

struct Case {
  int64_t n, k, pairs, divisor;
};

uint32_t u32(int64_t v) {
  return static_cast<uint32_t>(v);
}

// A team's walk through items first, first + step, ... below end as the kernel does it (its
// cursor, lane_next_item), against the divisions it replaces.
void check_walk(int64_t first, int64_t end, int64_t step, int64_t per_pair, int64_t divisor, int64_t first_row) {
  LaneCursor c = lane_cursor(u32(first), u32(per_pair), u32(divisor), static_cast<int>(first_row));
  for (int64_t item = first; item < end; item += step) {
    ASSERT_EQ(c.pair, item / per_pair) << "item " << item;
    ASSERT_EQ(c.group, item % per_pair) << "item " << item;
    ASSERT_EQ(c.x_row, item / per_pair / divisor - first_row) << "item " << item;
    c = lane_next_item(c, u32(step), u32(per_pair), u32(divisor), static_cast<int>(first_row));
  }
}

template <class Traits, bool kGated, bool kFew = false>
void check_grid(const Case& c, const DeviceFacts& device) {
  using Tl = MmvqLaneTiling<Traits>;
  constexpr LaneShape kShape = lane_pairs_shape<Traits>(true, kGated, kFew);
  const LanePairsGrid g = lane_pairs_grid<Traits, kGated, kFew>(c.n, c.k, c.pairs, c.divisor, device);
  ASSERT_TRUE(g.fits) << "n " << c.n << " k " << c.k << " pairs " << c.pairs;
  const int64_t per_pair = lane_items_per_pair(c.n, kGated, kShape.rows);
  const int64_t items = c.pairs * per_pair;
  const int64_t run = g.items_per_block;
  ASSERT_GE(run, 1);
  // the runs tile the items: the last block's run starts before the end, none past it
  EXPECT_GE(static_cast<int64_t>(g.blocks) * run, items);
  EXPECT_LT((static_cast<int64_t>(g.blocks) - 1) * run, items);
  // whole teams, at most one block's worth of warps
  EXPECT_EQ(g.threads % (32 * kShape.team_warps), 0);
  EXPECT_GE(g.threads, 32 * kShape.team_warps);
  EXPECT_LE(g.threads, 32 * kLaneBlockWarps);
  const int teams = g.threads / (32 * kShape.team_warps);
  EXPECT_LE(g.smem, device.shared_per_block_optin);
  // every block's exact rows fit the shared memory asked for
  const int64_t total_rows = (c.pairs + c.divisor - 1) / c.divisor;
  for (int64_t b = 0; b < g.blocks; ++b) {
    const int64_t begin = b * run, end = begin + run < items ? begin + run : items;
    const LaneBlockRows rows = lane_block_rows(begin, end, per_pair, c.divisor);
    ASSERT_GE(rows.first, 0);
    ASSERT_LE(rows.first + rows.count, total_rows) << "block " << b;
    ASSERT_LE(rows.count, lane_max_block_rows(run, per_pair, c.divisor, total_rows)) << "block " << b;
    ASSERT_LE((Tl::template pairs_smem_bytes<kGated, kFew>(c.k, rows.count, teams)), g.smem) << "block " << b;
    // the kernel's arithmetic: the rows in 32 bits, each team's items by its cursor
    const int64_t divisor = lane_pair_divisor(c.divisor, c.pairs);
    const LaneBlockRows rows32 = lane_block_rows<uint32_t>(u32(begin), u32(end), u32(per_pair), u32(divisor));
    ASSERT_EQ(rows32.first, rows.first) << "block " << b;
    ASSERT_EQ(rows32.count, rows.count) << "block " << b;
    for (int t = 0; t < teams && begin + t < end; ++t) check_walk(begin + t, end, teams, per_pair, divisor, rows.first);
  }
}

TEST(LanePairsGrid, RunsCoverTheItemsAndTheirRowsFit) {
  const DeviceFacts d = h200();
  using IQ4 = FormatTraits<QuantType::IQ4_XS>;
  using IQ2 = FormatTraits<QuantType::IQ2_XXS>;
  // the moe_proj benchmark's projection at 1, 8 and 16 tokens (top-8: x rows are tokens)
  for (int64_t tokens : {1, 8, 16}) {
    check_grid<IQ4, false>({768, 2048, tokens * 8, 8}, d);
    check_grid<IQ2, false>({768, 2048, tokens * 8, 8}, d);
    // a layer's gate/up (2 x 768 rows, an item per rows / 2 outputs) and down (x rows are pairs)
    check_grid<IQ4, true>({1536, 2048, tokens * 8, 8}, d);
    check_grid<IQ4, false>({2048, 768, tokens * 8, 1}, d);
    check_grid<IQ2, true>({4096, 7168, tokens * 8, 8}, d);
  }
  // a divisor past the pairs (launch_moe_vec_int8 passes lane_pair_divisor's): every pair reads row 0
  check_grid<IQ4, false>({768, 2048, 3, 8}, d);
  // few rows per pair and many pairs: a run spans many pairs and reads many rows
  check_grid<IQ4, false>({24, 512, 4000, 1}, d);
  check_grid<IQ4, true>({2, 256, 3001, 3}, d);
  // a row of 131072 activations fits one block, two of them do not: runs of one item
  check_grid<IQ4, false>({24, 131072, 4, 4}, d);
  check_grid<IQ4, false>({24, 131072, 28, 4}, d);
  check_grid<IQ4, true>({48, 131072, 9, 1}, d);
  // the types the pairs split gives two rows (tuning/sm90.h), with N tails and odd outputs
  using IQ1M = FormatTraits<QuantType::IQ1_M>;
  using Q50 = FormatTraits<QuantType::Q5_0>;
  check_grid<IQ1M, false>({770, 2048, 64, 8}, d);
  check_grid<IQ1M, true>({1538, 2048, 64, 8}, d);
  check_grid<Q50, false>({131, 416, 1000, 8}, d);
  check_grid<Q50, true>({262, 416, 7, 1}, d);
  // the splits for few items (two rows): their grids, also of shapes where the launch keeps the
  // common split (gate/up and down at one token of a layer)
  using IQ3S = FormatTraits<QuantType::IQ3_S>;
  check_grid<IQ3S, false, true>({768, 2048, 8, 8}, d);
  check_grid<IQ3S, true, true>({1536, 2048, 8, 8}, d);
  check_grid<IQ3S, false, true>({2048, 768, 8, 1}, d);
  check_grid<IQ2, false, true>({70, 768, 28, 4}, d);
  check_grid<IQ2, true, true>({142, 1280, 3, 1}, d);
}

// The split for few items serves where its items fit one wave of teams (a block per SM, 32 one-warp
// teams each), and only for the types that have one.
TEST(LanePairsGrid, FewItemsTakeTheirOwnSplit) {
  const DeviceFacts d = h200();
  using IQ3S = FormatTraits<QuantType::IQ3_S>;
  using IQ1M = FormatTraits<QuantType::IQ1_M>;
  static_assert(lane_pairs_has_few<IQ3S>() && !lane_pairs_has_few<IQ1M>());
  constexpr LaneShape kCommon = lane_pairs_shape<IQ3S>(true, false), kFew = lane_pairs_shape<IQ3S>(true, false, true);
  EXPECT_EQ(kCommon.rows, 4);
  EXPECT_EQ(kFew.rows, 2);
  EXPECT_TRUE(kFew.pairs);
  // moe_proj (N = 768, two-row items 384 per pair): one token's 8 pairs are 3072 items, two
  // tokens' 16 pairs 6144, against 132 x 32 = 4224 teams
  EXPECT_TRUE((lane_pairs_few<IQ3S, false>(768, 8, d)));
  EXPECT_TRUE((lane_pairs_few<IQ3S, false>(768, 11, d)));   // 4224 items
  EXPECT_FALSE((lane_pairs_few<IQ3S, false>(768, 12, d)));  // 4608
  EXPECT_FALSE((lane_pairs_few<IQ3S, false>(768, 16, d)));
  // gated: a two-row item is one output's gate and up rows, 768 per pair of 2 x 768 rows; a layer's
  // one token (8 pairs) is not few, for gate/up nor for the down projection (N = 2048)
  EXPECT_TRUE((lane_pairs_few<IQ3S, true>(1536, 5, d)));
  EXPECT_FALSE((lane_pairs_few<IQ3S, true>(1536, 6, d)));
  EXPECT_FALSE((lane_pairs_few<IQ3S, true>(1536, 8, d)));
  EXPECT_FALSE((lane_pairs_few<IQ3S, false>(2048, 8, d)));
  EXPECT_FALSE((lane_pairs_few<IQ1M, false>(768, 1, d)));
  // the sign-mask table: in the common splits of IQ2_XXS and IQ3_XXS, not in their splits for few
  // items (its build would sit on one token's chain), and for the dense kernel IQ2_XXS's only
  using IQ2 = FormatTraits<QuantType::IQ2_XXS>;
  using IQ3X = FormatTraits<QuantType::IQ3_XXS>;
  static_assert(lane_pairs_shape<IQ2>(true, false).sign_table && lane_pairs_shape<IQ2>(true, true).sign_table);
  static_assert(lane_pairs_shape<IQ3X>(true, false).sign_table);
  static_assert(!lane_pairs_shape<IQ2>(true, false, true).sign_table);
  static_assert(!lane_pairs_shape<IQ3X>(true, false, true).sign_table);
  static_assert(lane_shape<IQ2>(1).sign_table && !lane_shape<IQ3X>(1).sign_table);
  static_assert(!lane_pairs_shape<IQ3S>(true, false).sign_table);
  // a device of fewer multiprocessors fills sooner
  DeviceFacts small = d;
  small.multiprocessors = 16;
  EXPECT_TRUE((lane_pairs_few<IQ3S, false>(768, 1, small)));
  EXPECT_FALSE((lane_pairs_few<IQ3S, false>(768, 2, small)));
}

// The staged grid of moe_proj at eight tokens (64 pairs of 768 rows, K = 2048) on the H200 against
// the unstaged one: the same runs and teams, and beside them each team's ring: two stages of a box
// of four rows' stage units (unit_bytes each; gated, two boxes of two rows: the gate rows', the up
// rows'), each box in a slot of whole 128-byte units (the tensor copies' alignment), then the two
// barriers, the ring in 128-byte units; the rings start at a 128-byte boundary (128 bytes planned).
// Gated (the gate/up projection of the same layer: 2 x 768 rows) the same.
int64_t round_up_128(int64_t bytes) {
  return (bytes + 127) / 128 * 128;
}
template <class Traits>
void expect_rings_beside_the_runs(int64_t unit_bytes) {
  using Tl = MmvqLaneTiling<Traits>;
  static_assert(lane_pairs_shape<Traits>(false, false).staged && !lane_pairs_shape<Traits>(false, false, true).staged);
  const DeviceFacts d = h200();
  for (bool gated : {false, true}) {
    const LaneShape shape = lane_pairs_shape<Traits>(false, gated);
    ASSERT_EQ(shape.rows, 4);
    const int64_t slot = round_up_128(4 / (gated ? 2 : 1) * unit_bytes);
    EXPECT_EQ(Tl::stage_slot_bytes(shape, gated), slot);
    EXPECT_EQ(Tl::stage_ring_bytes(shape, gated), round_up_128(2 * (gated ? 2 : 1) * slot + 16));
    EXPECT_EQ(Tl::stage_ring_bytes(shape, gated) % 128, 0);
    const LanePairsGrid plain = gated ? lane_pairs_grid<Traits, true>(1536, 2048, 64, 8, d)
                                      : lane_pairs_grid<Traits, false>(768, 2048, 64, 8, d);
    const LanePairsGrid staged = gated ? lane_pairs_grid<Traits, true>(1536, 2048, 64, 8, d, true)
                                       : lane_pairs_grid<Traits, false>(768, 2048, 64, 8, d, true);
    ASSERT_TRUE(plain.fits && staged.fits);
    EXPECT_EQ(staged.items_per_block, plain.items_per_block);
    EXPECT_EQ(staged.threads, plain.threads);
    EXPECT_EQ(staged.smem - plain.smem, 128 + plain.threads / 32 * Tl::stage_ring_bytes(shape, gated));
  }
}

// IQ4_XS's staged rounds (tuning's staged split): on the H200 the rings fit beside the runs of
// moe_proj at eight tokens, which the launch requires; on a GPU of 99 KB per block they would
// shorten the runs, and the launch keeps the unstaged kernel there.
TEST(LanePairsGrid, StagedRingsFitBesideTheRuns) {
  using IQ4 = FormatTraits<QuantType::IQ4_XS>;
  using Tl = MmvqLaneTiling<IQ4>;
  expect_rings_beside_the_runs<IQ4>(544);
  const DeviceFacts d = h200();
  DeviceFacts small = d;
  small.shared_per_block_optin = 99 * 1024;
  const LanePairsGrid small_plain = lane_pairs_grid<IQ4, false>(768, 2048, 64, 8, small);
  const LanePairsGrid small_staged = lane_pairs_grid<IQ4, false>(768, 2048, 64, 8, small, true);
  EXPECT_LT(small_staged.items_per_block, small_plain.items_per_block);
  // rows' rounds in 16-byte units: K = 2048 (1088-byte rows), not K = 768 (408-byte rows)
  alignas(16) static uint8_t weights[64];
  EXPECT_TRUE(Tl::rows_in_16_byte_units(weights, 2048, 1088, 768 * 1088));
  EXPECT_FALSE(Tl::rows_in_16_byte_units(weights, 768, 408, 40 * 408));
  EXPECT_FALSE(Tl::rows_in_16_byte_units(weights + 8, 2048, 1088, 768 * 1088));
}

TEST(LanePairsGrid, StagedUnitsOfTwoRoundsWhereOneIsNotWhole) {
  using IQ2 = FormatTraits<QuantType::IQ2_XXS>;
  using Tl = MmvqLaneTiling<IQ2>;
  // a round is four 66-byte blocks (264 bytes, 8 mod 16): two to a unit; IQ4_XS's 544 alone
  static_assert(Tl::kStageRounds == 2 && Tl::kStageUnitBytes == 528);
  static_assert(MmvqLaneTiling<FormatTraits<QuantType::IQ4_XS>>::kStageRounds == 1);
  expect_rings_beside_the_runs<IQ2>(528);
  // rows of a multiple of eight blocks are whole units (K = 2048: 528 bytes); six blocks are not
  alignas(16) static uint8_t weights[64];
  EXPECT_TRUE(Tl::rows_in_16_byte_units(weights, 2048, 528, 768 * 528));
  EXPECT_FALSE(Tl::rows_in_16_byte_units(weights, 1536, 396, 30 * 396));
}

TEST(LanePairsGrid, DeclinesWhereNoRunFits) {
  const DeviceFacts d = h200();
  using IQ4 = FormatTraits<QuantType::IQ4_XS>;
  // one row of 212992 activations (234 KB with its scales) exceeds a block's 227 KB
  EXPECT_FALSE((lane_pairs_grid<IQ4, false>(24, 212992, 28, 4, d).fits));
  EXPECT_FALSE((lane_pairs_grid<IQ4, false>(24, 212992, 1, 1, d).fits));
  // a row past the shared memory of a device that offers less
  DeviceFacts small = d;
  small.shared_per_block_optin = 48 * 1024;
  EXPECT_FALSE((lane_pairs_grid<IQ4, false>(768, 65536, 1, 1, small).fits));
  EXPECT_TRUE((lane_pairs_grid<IQ4, false>(768, 32768, 1, 1, small).fits));
  // no items: nothing to launch
  EXPECT_FALSE((lane_pairs_grid<IQ4, false>(768, 2048, 0, 8, d).fits));
}

TEST(LanePairsGrid, CursorWalksAsTheDivisionsDo) {
  // steps below, at and past the items per pair (a pair passed over between two items), one item
  // per pair, divisors of one, top-k and past the pairs
  for (int64_t per_pair : {1, 2, 5, 6, 192, 384})
    for (int64_t step : {1, 3, 6, 12, 32})
      for (int64_t divisor : {1, 4, 8}) {
        check_walk(0, 3000, step, per_pair, divisor, 0);
        check_walk(1234, 4321, step, per_pair, divisor, 1234 / per_pair / divisor);
      }
  // the last items the launch allows (fewer than 2^32)
  const int64_t last = (int64_t{1} << 32) - 2;
  check_walk(last - 5000, last + 1, 32, 192, 8, (last - 5000) / 192 / 8);
  check_walk(last - 300, last + 1, 7, 1, 1, last - 300);
  const LaneBlockRows r = lane_block_rows<uint32_t>(u32(last - 999), u32(last + 1), 192, 8);
  const LaneBlockRows r64 = lane_block_rows<int64_t>(last - 999, last + 1, 192, 8);
  EXPECT_EQ(r.first, r64.first);
  EXPECT_EQ(r.count, r64.count);
  // a divisor past the pairs: every pair's row is 0 either way
  EXPECT_EQ(lane_pair_divisor(8, 3), 3);
  EXPECT_EQ(lane_pair_divisor(int64_t{1} << 40, 1000), 1000);
  EXPECT_EQ(lane_pair_divisor(8, 64), 8);
  EXPECT_EQ(lane_pair_divisor(8, 0), 1);
}

TEST(LanePairsGrid, BlockRowsOfARun) {
  // items of 10 per pair, pairs p / 4 -> rows: items [35, 95) are pairs 3..9, rows 0..2
  const LaneBlockRows r = lane_block_rows(35, 95, 10, 4);
  EXPECT_EQ(r.first, 0);
  EXPECT_EQ(r.count, 3);
  EXPECT_EQ(lane_max_block_rows(60, 10, 4, 100), 3);  // 60 items span at most 7 pairs: 3 rows
  EXPECT_EQ(lane_max_block_rows(60, 10, 1, 5), 5);    // never more than the rows there are
  EXPECT_EQ(lane_max_block_rows(1, 10, 1, 100), 1);   // one item: one pair, one row
  EXPECT_EQ(lane_max_block_rows(11, 10, 1, 100), 2);  // 11 items span two pairs at most
  EXPECT_EQ(lane_max_block_rows(12, 10, 1, 100), 3);  // 12 items can touch three
  EXPECT_EQ(lane_max_block_rows(12, 10, 8, 100), 2);  // three consecutive pairs: two rows of eight
  EXPECT_EQ(lane_items_per_pair(768, false, 2), 384);
  EXPECT_EQ(lane_items_per_pair(769, false, 2), 385);
  EXPECT_EQ(lane_items_per_pair(1536, true, 2), 768);
  // gated items of four rows: two outputs each, the last one alone where the outputs are odd
  EXPECT_EQ(lane_items_per_pair(1536, true, 4), 384);
  EXPECT_EQ(lane_items_per_pair(1538, true, 4), 385);
  EXPECT_EQ(lane_items_per_pair(771, false, 4), 193);
}

}  // namespace
}  // namespace lowbit::cuda_detail
