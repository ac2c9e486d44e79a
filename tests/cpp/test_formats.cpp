// Format core: block sizes, type table, codebook identities, scalar conversions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <random>
#include <set>
#include <vector>

#include "lowbit/error.h"
#include "lowbit/formats/all.h"
#include "lowbit/weights.h"

namespace lowbit {
namespace {

TEST(TypeTable, EveryWeightTypeMatchesItsTraits) {
  int weights = 0;
  for (const TypeInfo& info : all_types()) {
    if (!info.is_weight) continue;
    ++weights;
    visit_weight_type(info.type, [&](auto traits) {
      using T = decltype(traits);
      EXPECT_EQ(info.block_elems, T::kBlockElems) << info.name;
      EXPECT_EQ(info.block_bytes, T::kBlockBytes) << info.name;
      EXPECT_STREQ(info.name, T::kName);
      EXPECT_EQ(info.block_elems % kGroupElems, 0) << info.name;
    });
  }
  EXPECT_EQ(weights, 14);
}

TEST(TypeTable, GgmlIdsAndSizes) {
  struct Expect {
    int id;
    const char* name;
    int elems, bytes;
  };
  const Expect expected[] = {{16, "iq2_xxs", 256, 66}, {17, "iq2_xs", 256, 74}, {22, "iq2_s", 256, 82},
                             {18, "iq3_xxs", 256, 98}, {21, "iq3_s", 256, 110}, {19, "iq1_s", 256, 50},
                             {29, "iq1_m", 256, 56},   {20, "iq4_nl", 32, 18},  {23, "iq4_xs", 256, 136},
                             {39, "mxfp4", 32, 17},    {8, "q8_0", 32, 34},     {6, "q5_0", 32, 22},
                             {9, "q8_1", 32, 36}};
  for (const Expect& e : expected) {
    const TypeInfo* info = find_type(e.id);
    ASSERT_NE(info, nullptr) << e.name;
    EXPECT_STREQ(info->name, e.name);
    EXPECT_EQ(info->block_elems, e.elems) << e.name;
    EXPECT_EQ(info->block_bytes, e.bytes) << e.name;
    EXPECT_EQ(find_type(e.name), info);
  }
}

TEST(TypeTable, ActivationAndUnknownTypesAreRejectedAsWeights) {
  EXPECT_THROW(weight_type_info(9), Error);
  EXPECT_THROW(weight_type_info(12345), Error);
  try {
    weight_type_info(9, "qtype");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("qtype"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("activation"), std::string::npos);
  }
}

TEST(Shapes, RowBytesAndK) {
  EXPECT_EQ(row_bytes(QuantType::IQ4_XS, 14336), 56 * 136);
  EXPECT_EQ(k_from_row_bytes(QuantType::IQ4_XS, 56 * 136), 14336);
  EXPECT_EQ(row_bytes(QuantType::MXFP4_SPLIT, 64), 32);
  EXPECT_EQ(scales_per_row(QuantType::MXFP8_E4M3, 96), 3);
  EXPECT_THROW(row_bytes(QuantType::IQ2_XXS, 300), Error);
  EXPECT_THROW(row_bytes(QuantType::IQ4_NL, 0), Error);
  EXPECT_THROW(k_from_row_bytes(QuantType::IQ2_XXS, 67), Error);
  EXPECT_THROW(row_bytes(QuantType::Q8_1, 32), Error);
}

TEST(Codebooks, KsignsFormulaEqualsGgmlTable) {
  for (uint32_t i = 0; i < 128; ++i) EXPECT_EQ(ksigns_iq2xs(i), codebook::kKsignsIq2xs[i]) << i;
}

// Every byte of every row of a grid is one of the format's values (ggml's definitions, as gguf-py
// gives them), rows are distinct (a duplicated or truncated row would leave one out) and the
// tables have ggml's sizes. tests/python/test_codebooks.py compares every entry with gguf-py.
template <class Word, size_t kRows>
void expect_grid(const Word (&grid)[kRows], size_t rows, std::initializer_list<uint32_t> values, const char* name) {
  EXPECT_EQ(kRows, rows) << name;
  const std::set<uint32_t> allowed(values);
  std::set<uint32_t> seen_bytes;
  for (size_t r = 0; r < kRows; ++r)
    for (size_t i = 0; i < sizeof(Word); ++i) {
      const uint32_t b = static_cast<uint32_t>(grid[r] >> (8 * i)) & 0xFFu;
      EXPECT_EQ(allowed.count(b), 1u) << name << " row " << r << " byte " << i << " = " << b;
      seen_bytes.insert(b);
    }
  EXPECT_EQ(seen_bytes, allowed) << name << ": some value of the format never occurs";
  EXPECT_EQ(std::set<Word>(std::begin(grid), std::end(grid)).size(), kRows) << name << ": duplicated rows";
}

TEST(Codebooks, GridValuesAreTheFormatsMagnitudes) {
  expect_grid(codebook::kIq2xxsGrid, 256, {0x08, 0x19, 0x2b}, "iq2_xxs");
  expect_grid(codebook::kIq2xsGrid, 512, {0x08, 0x19, 0x2b}, "iq2_xs");
  expect_grid(codebook::kIq2sGrid, 1024, {0x08, 0x19, 0x2b}, "iq2_s");
  expect_grid(codebook::kIq3xxsGrid, 256, {4, 12, 20, 28, 36, 44, 52, 62}, "iq3_xxs");
  expect_grid(codebook::kIq3sGrid, 512, {1, 3, 5, 7, 9, 11, 13, 15}, "iq3_s");
  expect_grid(codebook::kIq1sGrid, 2048, {0xFF, 0x00, 0x01}, "iq1_s");  // -1, 0, +1
  // ggml's first and last rows (a table shifted by one row keeps its value set)
  EXPECT_EQ(codebook::kIq2xxsGrid[0], 0x0808080808080808ull);
  EXPECT_EQ(codebook::kIq2xxsGrid[255], 0x2b2b2b1908081908ull);
  EXPECT_EQ(codebook::kIq3xxsGrid[0], 0x04040404u);
  EXPECT_EQ(codebook::kIq3xxsGrid[255], 0x3e341c04u);
  EXPECT_EQ(codebook::kIq3sGrid[0], 0x01010101u);
  EXPECT_EQ(codebook::kIq3sGrid[511], 0x0f0f0101u);
}

TEST(Scalars, Fp16RoundTripsEveryFiniteValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float f = fp16_to_float(bits);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(f))));
      continue;
    }
    EXPECT_EQ(float_to_fp16(f), bits) << h;
  }
}

TEST(Scalars, Fp16RoundsToNearestEven) {
  EXPECT_EQ(float_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie -> even (1.0)
  EXPECT_EQ(float_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie -> even (1 + 2^-9)
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7C00);                          // rounds past max -> inf
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -25)), 0x0000);             // half the min subnormal -> 0
  EXPECT_EQ(float_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
}

TEST(Scalars, E8m0AndE4m3) {
  EXPECT_EQ(e8m0_to_float(127), 1.0f);
  EXPECT_EQ(e8m0_to_float(0), std::ldexp(1.0f, -127));
  EXPECT_EQ(e8m0_to_float(254), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(e8m0_to_float(255)));
  EXPECT_EQ(e8m0_to_float_half_ggml(127), 0.5f);
  EXPECT_EQ(e8m0_to_float_half_ggml(0), std::ldexp(1.0f, -128));
  EXPECT_EQ(e8m0_to_float_half_ggml(255), std::ldexp(1.0f, 127));
  EXPECT_EQ(e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_to_float(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(e4m3_to_float(0xB8), -1.0f);
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xFF)));
}

TEST(BytePerm, HostMatchesPrmtSemantics) {
  EXPECT_EQ(byte_perm(0x03020100u, 0x07060504u, 0x7531u), 0x07050301u);
  EXPECT_EQ(byte_perm(0x00000080u, 0u, 0x4448u), 0x000000FFu);  // sign replicate
  EXPECT_EQ(spread_sign_bits4(0b1010u), 0x80008000u);
}

// The int8 form (decode_i8 * scale_i8) yields the same float as decode_group for every weight of
// random blocks (random bytes, so every code, sign and scale pattern appears), in the format's order.
template <class Traits>
void expect_int8_form_matches(std::mt19937& rng) {
  if constexpr (HasInt8<Traits>::value) {
    const Codebooks cb = host_codebooks();
    // the block at every offset mod 4 of a padded buffer with random padding (a read that took
    // bytes from outside the block, or misplaced an unaligned block, would differ)
    std::vector<uint8_t> bytes(Traits::kBlockBytes + 8);
    for (int trial = 0; trial < 2000; ++trial) {
      for (auto& b : bytes) b = static_cast<uint8_t>(rng());
      const BlockRef block{bytes.data() + 4 + trial % 4, static_cast<uint8_t>(rng() % 254)};  // split scale: finite
      float ref[Traits::kBlockElems];
      for (int g = 0; g < Traits::kBlockElems / kGroupElems; ++g)
        decode_group_f32<Traits>(block, g, cb, ref + kGroupElems * g);
      for (int g = 0; g < Traits::kBlockElems / kGroupElems; ++g) {
        const Int8Group q = Traits::decode_i8(block, g, cb);
        if constexpr (HasI8Addends<Traits>::value) {  // the dp4a MMVQ's one-token form
          const Int8Addends s = Traits::decode_i8_addends(block, g, cb);
          for (int j = 0; j < 8; ++j) {
            const int sum = static_cast<int8_t>(group_byte(s.a, j)) + static_cast<int8_t>(group_byte(s.b, j));
            ASSERT_EQ(sum, static_cast<int8_t>(group_byte(q.q, j))) << Traits::kName << " group " << g << " byte " << j;
          }
        }
        if constexpr (HasWholeSubAddends<Traits>::value) {  // the same through the whole-sub-block read
          const Int8Addends s = Traits::decode_i8_addends_whole_sub(block, g, cb);
          for (int j = 0; j < 8; ++j) {
            const int sum = static_cast<int8_t>(group_byte(s.a, j)) + static_cast<int8_t>(group_byte(s.b, j));
            ASSERT_EQ(sum, static_cast<int8_t>(group_byte(q.q, j))) << Traits::kName << " group " << g << " byte " << j;
          }
        }
        const Int8Group q_whole = decode_i8_in_sub_block<Traits>(block, g, cb);  // the dp4a MMVQ's read
        ASSERT_TRUE(q_whole.q[0] == q.q[0] && q_whole.q[1] == q.q[1]) << Traits::kName << " group " << g;
        for (int j = 0; j < 8; ++j) {
          const int e = i8_element(Traits::kI8Order, g, j);
          const auto v = static_cast<int8_t>(group_byte(q.q, j));
          const float got = Traits::scale_i8(block, e / Traits::kI8ScaleElems) * static_cast<float>(v);
          if (std::isnan(ref[e])) {
            ASSERT_TRUE(std::isnan(got)) << Traits::kName << " element " << e;
          } else {
            ASSERT_EQ(got, ref[e]) << Traits::kName << " element " << e << " int8 " << int{v};
          }
        }
      }
    }
  }
}

// the check of decode_i8_in_sub_block above must meet the formats' own whole-sub-block reads
static_assert(HasWholeSubGrid<FormatTraits<QuantType::IQ2_XXS>>::value &&
                  HasWholeSubDecode<FormatTraits<QuantType::IQ4_XS>>::value,
              "IQ2_XXS and IQ4_XS define whole-sub-block reads (the forms checked above)");

TEST(Int8Form, EqualsTheFloatDecodeForEveryIntegerFormat) {
  std::mt19937 rng(std::random_device{}());
  int formats = 0;
#define LOWBIT_CHECK_INT8(Name)                                 \
  expect_int8_form_matches<FormatTraits<QuantType::Name>>(rng); \
  formats += HasInt8<FormatTraits<QuantType::Name>>::value ? 1 : 0;
  LOWBIT_FOR_EACH_WEIGHT_TYPE(LOWBIT_CHECK_INT8)
#undef LOWBIT_CHECK_INT8
  EXPECT_EQ(formats, 13);  // every weight type but MXFP8 (E4M3 values are not integers)
}

// The dp4a MMVQ's aligned-word read (HasLaneWords): every sub-block of every block of a row of
// paired blocks (a 4-byte-aligned row of an even number of blocks, random bytes around it) read
// through lane_words decodes as the block's own decode_i8 (grid_i8, addends) and scale_i8; and
// what it decodes does not change when every byte outside the row does.
template <class Traits>
void expect_lane_words_match(std::mt19937& rng) {
  using Words = typename Traits::LaneWords;
  const Codebooks cb = host_codebooks();
  constexpr int kBlocks = 12, kSubs = Traits::kBlockElems / 32, kScalesPerSub = 32 / Traits::kI8ScaleElems;
  constexpr int kPad = 8, kRowBytes = kBlocks * Traits::kBlockBytes;
  std::vector<uint8_t> bytes(kPad + kRowBytes + kPad);
  const uint8_t* row = bytes.data() + kPad;  // 4-byte aligned (vector storage is)
  ASSERT_EQ(reinterpret_cast<uintptr_t>(row) % 4, 0u);
  auto decode_all = [&](const Words& w, std::vector<uint32_t>& out) {
    out.clear();
    for (int h = 0; h < kScalesPerSub; ++h) {
      const float v = Traits::scale_i8_from(w, h);
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
        const Words w = Traits::lane_words(block - (odd ? 2 : 0), s, odd);
        for (int h = 0; h < kScalesPerSub; ++h) {
          const float v = Traits::scale_i8(b, kScalesPerSub * s + h), v_words = Traits::scale_i8_from(w, h);
          ASSERT_TRUE(v == v_words || (std::isnan(v) && std::isnan(v_words)))
              << Traits::kName << " block " << j << " sub-block " << s;
        }
        for (int l = 0; l < 4; ++l) {
          const Int8Group q = Traits::decode_i8(b, 4 * s + l, cb), q_words = decode_i8_from_words<Traits>(w, l, cb);
          ASSERT_TRUE(q.q[0] == q_words.q[0] && q.q[1] == q_words.q[1])
              << Traits::kName << " block " << j << " sub-block " << s << " group " << l;
          if constexpr (HasGridI8<Traits>::value) {
            const GridGroup g = Traits::grid_i8(b, 4 * s + l, cb), g_words = Traits::grid_i8_from(w, l, cb);
            ASSERT_TRUE(g.mag[0] == g_words.mag[0] && g.mag[1] == g_words.mag[1] && g.signs == g_words.signs)
                << Traits::kName << " block " << j << " sub-block " << s << " group " << l;
          }
          if constexpr (HasI8Addends<Traits>::value) {
            const Int8Addends a = Traits::decode_i8_addends_from(w, l, cb);
            for (int e = 0; e < 8; ++e) {
              const int sum = static_cast<int8_t>(group_byte(a.a, e)) + static_cast<int8_t>(group_byte(a.b, e));
              ASSERT_EQ(sum, static_cast<int8_t>(group_byte(q.q, e))) << Traits::kName << " block " << j;
            }
          }
        }
        // the same decode with every byte outside the row replaced
        decode_all(w, first);
        for (int i = 0; i < kPad; ++i) bytes[i] ^= 0xA5u, bytes[kPad + kRowBytes + i] ^= 0x5Au;
        decode_all(Traits::lane_words(block - (odd ? 2 : 0), s, odd), again);
        ASSERT_EQ(first, again) << Traits::kName << " block " << j << " sub-block " << s << " reads outside the row";
      }
    }
  }
}

TEST(Int8Form, LaneWordsEqualTheBlockReads) {
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

TEST(Int8Form, ElementOrdersArePermutations) {
  for (I8Order order : {I8Order::kContiguous, I8Order::kNibbleInterleaved}) {
    std::vector<int> seen(32, 0);
    for (int g = 0; g < 4; ++g)
      for (int j = 0; j < 8; ++j) ++seen.at(static_cast<size_t>(i8_element(order, g, j)));
    for (int c : seen) EXPECT_EQ(c, 1);
  }
  EXPECT_EQ(i8_element(I8Order::kNibbleInterleaved, 1, 1), 20);  // high nibble of byte 4
  EXPECT_EQ(i8_element(I8Order::kNibbleInterleaved, 5, 6), 32 + 7);
}

}  // namespace
}  // namespace lowbit
