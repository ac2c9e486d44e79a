// The dp4a MMVQ's reads of each format (csrc/cuda/mmvq/lane_reads*.h) against the format's own
// block reads (decode_i8, grid_i8, scale_i8), on random blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/common/sign_mask_table.h"
#include "cuda/mmvq/lane_reads.h"
#include "lowbit/formats/all.h"

namespace lowbit {
namespace {

// Each byte of the group an Int8Addends pair stands for (a + b per byte, as dp4a sums them).
int addend_byte(const Int8Addends& s, int j) {
  return static_cast<int8_t>(group_byte(s.a, j)) + static_cast<int8_t>(group_byte(s.b, j));
}

// The reads that decode one int8 group from a block (addends, whole-sub-block reads) give what
// decode_i8 gives, for a block at every offset mod 4 of a padded buffer with random padding.
template <class Traits>
void expect_group_reads_match(std::mt19937& rng, int& formats) {
  if constexpr (HasInt8<Traits>::value) {
    const Codebooks cb = host_codebooks();
    std::vector<uint8_t> bytes(Traits::kBlockBytes + 8);
    for (int trial = 0; trial < 1000; ++trial) {
      for (auto& b : bytes) b = static_cast<uint8_t>(rng());
      const BlockRef block{bytes.data() + 4 + trial % 4, static_cast<uint8_t>(rng() % 254)};
      for (int g = 0; g < Traits::kBlockElems / kGroupElems; ++g) {
        const Int8Group q = Traits::decode_i8(block, g, cb);
        for (int j = 0; j < 8; ++j) {
          const int want = static_cast<int8_t>(group_byte(q.q, j));
          if constexpr (HasI8Addends<Traits>::value) {  // the one-token form
            ASSERT_EQ(addend_byte(LaneReadsOf<Traits>::decode_i8_addends(block, g, cb), j), want)
                << Traits::kName << " group " << g << " byte " << j;
          }
          if constexpr (HasWholeSubAddends<Traits>::value) {  // the same through the whole-sub-block read
            ASSERT_EQ(addend_byte(LaneReadsOf<Traits>::decode_i8_addends_whole_sub(block, g, cb), j), want)
                << Traits::kName << " group " << g << " byte " << j;
          }
        }
        const Int8Group q_whole = decode_i8_in_sub_block<Traits>(block, g, cb);
        ASSERT_TRUE(q_whole.q[0] == q.q[0] && q_whole.q[1] == q.q[1]) << Traits::kName << " group " << g;
      }
    }
    if (HasI8Addends<Traits>::value || HasWholeSubDecode<Traits>::value || HasWholeSubGrid<Traits>::value) ++formats;
  }
}

TEST(LaneReads, GroupReadsEqualDecodeI8) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(seed);  // reproduces a failure
  std::mt19937 rng(seed);
  int formats = 0;
#define LOWBIT_CHECK_GROUP_READS(Name) expect_group_reads_match<FormatTraits<QuantType::Name>>(rng, formats);
  LOWBIT_FOR_EACH_WEIGHT_TYPE(LOWBIT_CHECK_GROUP_READS)
#undef LOWBIT_CHECK_GROUP_READS
  EXPECT_EQ(formats, 3);  // IQ4_NL (addends), IQ4_XS (addends, whole sub-blocks), IQ2_XXS (whole sub-blocks)
}

// the formats without reads of their own fall back to their FormatTraits
static_assert(!HasLaneWords<FormatTraits<QuantType::IQ2_XS>>::value &&
                  !HasI8Addends<FormatTraits<QuantType::Q8_0>>::value &&
                  lane_anchor<FormatTraits<QuantType::MXFP4>>(3) == 0,
              "a type without LaneReads is read through its format alone");

// IQ3_S's nine-bit index pieces: spread_bits4 puts bit j of four at bit 0 of byte j, and grid_index
// (one prmt, its upper bytes by sign replication) is byte j of `low` with that bit as bit 8, for
// every byte value, four high bits and position (low's other bytes random). Before
// WordsEqualTheBlockReads, whose host lookups a wrong index would send out of bounds.
TEST(LaneReads, Iq3sNineBitIndexByPrmt) {
  using R = LaneReads<QuantType::IQ3_S>;
  for (uint32_t four = 0; four < 16; ++four) {
    uint32_t expected = 0;
    for (int j = 0; j < 4; ++j) expected |= (four >> j & 1u) << (8 * j);
    EXPECT_EQ(spread_bits4(four), expected) << "bits " << four;
  }
  std::mt19937 rng(20261204);
  for (uint32_t byte = 0; byte < 256; ++byte)
    for (uint32_t four = 0; four < 16; ++four)
      for (int j = 0; j < 4; ++j) {
        const uint32_t low = (static_cast<uint32_t>(rng()) & ~(0xFFu << (8 * j))) | byte << (8 * j);
        ASSERT_EQ(R::grid_index(low, spread_bits4(four), j), byte | (four >> j & 1u) << 8)
            << "byte " << byte << " bits " << four << " position " << j;
      }
}

// The dp4a MMVQ's aligned-word read (HasLaneWords): every sub-block of every block of a row of
// paired blocks (a 4-byte-aligned row of an even number of blocks, random bytes around it) read
// through lane_words decodes as the block's own decode_i8 (grid_i8, addends) and scale_i8; and
// what it decodes does not change when every byte outside the row does.
template <class Traits>
void expect_lane_words_match(std::mt19937& rng) {
  using Reads = LaneReadsOf<Traits>;
  using Words = typename Reads::LaneWords;
  const Codebooks cb = host_codebooks();
  constexpr int kBlocks = 12, kSubs = Traits::kBlockElems / 32, kScalesPerSub = 32 / Traits::kI8ScaleElems;
  constexpr int kPad = 8, kRowBytes = kBlocks * Traits::kBlockBytes;
  std::vector<uint8_t> bytes(kPad + kRowBytes + kPad);
  const uint8_t* row = bytes.data() + kPad;  // 4-byte aligned (vector storage is)
  ASSERT_EQ(reinterpret_cast<uintptr_t>(row) % 4, 0u);
  auto decode_all = [&](const Words& w, std::vector<uint32_t>& out) {
    out.clear();
    for (int h = 0; h < kScalesPerSub; ++h) {
      const float v = Reads::scale_i8_from(w, h);
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      out.push_back(bits);
    }
    for (int l = 0; l < 4; ++l) {
      const Int8Group q = decode_i8_from_words<Traits>(w, l, cb);
      out.push_back(q.q[0]), out.push_back(q.q[1]);
    }
  };
  std::vector<uint32_t> first, again;
  for (int trial = 0; trial < 200; ++trial) {
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    for (int j = 0; j < kBlocks; ++j) {
      const bool odd = Traits::kBlockBytes % 4 == 2 && j % 2 == 1;  // 4-byte-aligned blocks: never
      const uint8_t* block = row + j * Traits::kBlockBytes;
      const BlockRef b{block, 0};
      for (int s = 0; s < kSubs; ++s) {
        const Words w = Reads::lane_words(block - (odd ? 2 : 0), s, odd);
        for (int h = 0; h < kScalesPerSub; ++h) {
          const float v = Traits::scale_i8(b, kScalesPerSub * s + h), v_words = Reads::scale_i8_from(w, h);
          ASSERT_TRUE(v == v_words || (std::isnan(v) && std::isnan(v_words)))
              << Traits::kName << " block " << j << " sub-block " << s;
        }
        for (int l = 0; l < 4; ++l) {
          const Int8Group q = Traits::decode_i8(b, 4 * s + l, cb), q_words = decode_i8_from_words<Traits>(w, l, cb);
          ASSERT_TRUE(q.q[0] == q_words.q[0] && q.q[1] == q_words.q[1])
              << Traits::kName << " block " << j << " sub-block " << s << " group " << l;
          if constexpr (HasGridI8<Traits>::value) {
            const GridGroup g = Traits::grid_i8(b, 4 * s + l, cb), g_words = Reads::grid_i8_from(w, l, cb);
            ASSERT_TRUE(g.mag[0] == g_words.mag[0] && g.mag[1] == g_words.mag[1] && g.signs == g_words.signs)
                << Traits::kName << " block " << j << " sub-block " << s << " group " << l;
            if constexpr (HasSignCodes<Traits>::value) {  // the code the lane kernel's sign table reads
              const uint32_t code = Reads::sign_code_from(w, l);
              ASSERT_TRUE(code < 128u && ksigns_iq2xs(code) == g.signs)
                  << Traits::kName << " block " << j << " sub-block " << s << " group " << l;
            }
          }
          if constexpr (HasI8Addends<Traits>::value) {
            const Int8Addends a = Reads::decode_i8_addends_from(w, l, cb);
            for (int e = 0; e < 8; ++e) {
              const int sum = static_cast<int8_t>(group_byte(a.a, e)) + static_cast<int8_t>(group_byte(a.b, e));
              ASSERT_EQ(sum, static_cast<int8_t>(group_byte(q.q, e))) << Traits::kName << " block " << j;
            }
          }
        }
        // the same decode with every byte outside the row replaced
        decode_all(w, first);
        for (int i = 0; i < kPad; ++i) bytes[i] ^= 0xA5u, bytes[kPad + kRowBytes + i] ^= 0x5Au;
        decode_all(Reads::lane_words(block - (odd ? 2 : 0), s, odd), again);
        ASSERT_EQ(first, again) << Traits::kName << " block " << j << " sub-block " << s << " reads outside the row";
      }
    }
  }
}

TEST(LaneReads, WordsEqualTheBlockReads) {
  int formats = 0;
#define LOWBIT_CHECK_LANE_WORDS(Name)                                 \
  if constexpr (HasLaneWords<FormatTraits<QuantType::Name>>::value) { \
    const unsigned seed = std::random_device{}();                     \
    SCOPED_TRACE(seed); /* reproduces a failure */                    \
    std::mt19937 rng(seed);                                           \
    expect_lane_words_match<FormatTraits<QuantType::Name>>(rng);      \
    ++formats;                                                        \
  }
  LOWBIT_FOR_EACH_WEIGHT_TYPE(LOWBIT_CHECK_LANE_WORDS)
#undef LOWBIT_CHECK_LANE_WORDS
  // IQ4_NL, IQ4_XS, IQ2_XXS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M (not IQ2_XS, Q5_0, Q8_0)
  EXPECT_EQ(formats, 8);
}

// dp4a as the hardware computes it: the four signed bytes of a times those of b, summed.
int dp4a_host(uint32_t a, uint32_t b) {
  int sum = 0;
  for (int i = 0; i < 4; ++i)
    sum += static_cast<int8_t>(static_cast<uint8_t>(a >> (8 * i))) *
           static_cast<int8_t>(static_cast<uint8_t>(b >> (8 * i)));
  return sum;
}

// The lane kernel's sign-mask table (SignMaskTable): built store by store as the kernel's block
// does, every lane's copy (lane % copies) gives each code's two byte masks, for the layouts of
// 8-byte grid entries (one plane) and 4-byte ones (two), and its size is 128 * 8 * copies.
template <int kEntryBytes, int kCopies>
void expect_sign_mask_table() {
  using Table = SignMaskTable<kEntryBytes, kCopies>;
  static_assert(Table::kBytes == 128 * 8 * kCopies, "mmvq_tiling.h's table_bytes");
  std::vector<uint32_t> words(Table::kStores * 4, 0xDEADBEEFu);
  for (int i = 0; i < Table::kStores; ++i) {
    uint32_t v[4];
    Table::store_words(i, v);
    for (int k = 0; k < 4; ++k) words[4 * i + k] = v[k];
  }
  const uint8_t* table = reinterpret_cast<const uint8_t*>(words.data());
  for (int lane = 0; lane < 32; ++lane)
    for (uint32_t code = 0; code < 128; ++code) {
      uint32_t lo = 0, hi = 0;
      Table::masks_at(table + (lane % kCopies) * kEntryBytes, code, lo, hi);
      const uint32_t signs = ksigns_iq2xs(code);
      ASSERT_TRUE(lo == sign_byte_mask4(signs & 0xFu) && hi == sign_byte_mask4(signs >> 4))
          << kEntryBytes << "-byte entries, " << kCopies << " copies, lane " << lane << " code " << code;
    }
}

TEST(GridSigns, SignMaskTableGivesEveryLaneItsMasks) {
  expect_sign_mask_table<8, 16>();  // IQ2_XXS
  expect_sign_mask_table<8, 2>();
  expect_sign_mask_table<4, 32>();  // IQ3_XXS
  expect_sign_mask_table<4, 4>();
}

TEST(GridSigns, ByteMaskSpreadsEachBit) {
  for (uint32_t nibble = 0; nibble < 16; ++nibble) {
    uint32_t expected = 0;
    for (int i = 0; i < 4; ++i)
      if (nibble >> i & 1u) expected |= 0xFFu << (8 * i);
    EXPECT_EQ(sign_byte_mask4(nibble), expected) << "nibble " << nibble;
  }
}

// grid_i8 (magnitudes and signs apart) gives decode_i8 once the signs are applied, and its split
// dot product dot(mag, x) - 2 dot(mag & mask, x) equals the signed one, on random blocks and x.
template <class Traits>
int expect_split_signs_match(std::mt19937& rng) {
  if constexpr (HasGridI8<Traits>::value) {
    const Codebooks cb = host_codebooks();
    std::vector<uint8_t> bytes(Traits::kBlockBytes);
    for (int trial = 0; trial < 500; ++trial) {
      for (auto& b : bytes) b = static_cast<uint8_t>(rng());
      const BlockRef block{bytes.data(), 0};
      for (int g = 0; g < Traits::kBlockElems / kGroupElems; ++g) {
        const Int8Group q = Traits::decode_i8(block, g, cb);
        const GridGroup grid = grid_i8_in_sub_block<Traits>(block, g, cb);
        const Int8Group signed_grid = apply_sign_bits(grid);
        EXPECT_TRUE(grid.signs < 256u && signed_grid.q[0] == q.q[0] && signed_grid.q[1] == q.q[1])
            << Traits::kName << " group " << g;
        for (int w = 0; w < 2; ++w) {
          const uint32_t x = static_cast<uint32_t>(rng());
          const uint32_t mask = sign_byte_mask4(w ? grid.signs >> 4 : grid.signs & 0xFu);
          EXPECT_EQ(dp4a_host(grid.mag[w], x) - 2 * dp4a_host(grid.mag[w] & mask, x), dp4a_host(q.q[w], x))
              << Traits::kName << " group " << g << " word " << w;
        }
      }
    }
    return 1;
  }
  return 0;
}

TEST(GridSigns, SplitDotEqualsTheSignedDotForEveryGridFormat) {
  std::mt19937 rng(std::random_device{}());
  int formats = 0;
#define LOWBIT_CHECK_GRID(Name) formats += expect_split_signs_match<FormatTraits<QuantType::Name>>(rng);
  LOWBIT_FOR_EACH_WEIGHT_TYPE(LOWBIT_CHECK_GRID)
#undef LOWBIT_CHECK_GRID
  EXPECT_EQ(formats, 5);  // IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S
}

}  // namespace
}  // namespace lowbit
