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
  // Every selector nibble (PTX prmt, default mode): 0-7 pick byte n of hi:lo, 8-15 replicate the
  // sign of byte n - 8; the bytes alternate between negative and non-negative.
  const uint32_t lo = 0x44832281u, hi = 0x08F07F90u;
  const uint32_t picked[16] = {0x81, 0x22, 0x83, 0x44, 0x90, 0x7F, 0xF0, 0x08,
                               0xFF, 0x00, 0xFF, 0x00, 0xFF, 0x00, 0xFF, 0x00};
  for (uint32_t n = 0; n < 16; ++n) {
    EXPECT_EQ(byte_perm(lo, hi, n * 0x1111u), picked[n] * 0x01010101u) << "nibble " << n;
    EXPECT_EQ(byte_perm(lo, hi, 0x7600u | n << 4), 0x08F00081u | picked[n] << 8) << "nibble " << n << " in byte 1";
  }
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

// Value j (0..7) of a group by reference, from the host grids.
template <class Traits>
float grid_codes_value(const GridCodes& c, const Codebooks& cb, int j) {
  uint64_t mag = 0;
  if constexpr (Traits::kCodebook == Codebook::kIq2xxs) mag = cb.iq2xxs_grid[c.index[0]] >> (8 * j);
  if constexpr (Traits::kCodebook == Codebook::kIq3xxs) mag = cb.iq3xxs_grid[c.index[j / 4]] >> (8 * (j % 4));
  if constexpr (Traits::kCodebook == Codebook::kIq3s) mag = cb.iq3s_grid[c.index[j / 4]] >> (8 * (j % 4));
  const auto m = static_cast<float>(mag & 0xFFu);
  return ((c.signs >> j) & 1u ? -m : m) * c.scale;
}

// grid_codes (MMQ's bf16 decode from a bf16 copy of the grid) yields the same floats as
// decode_group for every weight of random blocks (random scale bits too: NaN where d is).
template <class Traits>
void expect_grid_codes_match(std::mt19937& rng) {
  if constexpr (HasGridCodes<Traits>::value) {
    const Codebooks cb = host_codebooks();
    std::vector<uint8_t> bytes(Traits::kBlockBytes + 8);
    for (int trial = 0; trial < 2000; ++trial) {
      for (auto& b : bytes) b = static_cast<uint8_t>(rng());
      const BlockRef block{bytes.data() + 4 + trial % 4, 0};
      for (int g = 0; g < Traits::kBlockElems / kGroupElems; ++g) {
        float ref[kGroupElems];
        decode_group_f32<Traits>(block, g, cb, ref);
        const GridCodes c = Traits::grid_codes(block, g);
        EXPECT_LT(c.signs, 256u);
        for (int j = 0; j < kGroupElems; ++j) {
          const float got = grid_codes_value<Traits>(c, cb, j);
          if (std::isnan(ref[j])) {
            ASSERT_TRUE(std::isnan(got)) << Traits::kName << " group " << g << " weight " << j;
          } else {
            ASSERT_EQ(got, ref[j]) << Traits::kName << " group " << g << " weight " << j;
          }
        }
      }
    }
  }
}

TEST(GridCodes, EqualTheFloatDecode) {
  std::mt19937 rng(std::random_device{}());
  int formats = 0;
#define LOWBIT_CHECK_GRID_CODES(Name)                          \
  expect_grid_codes_match<FormatTraits<QuantType::Name>>(rng); \
  formats += HasGridCodes<FormatTraits<QuantType::Name>>::value ? 1 : 0;
  LOWBIT_FOR_EACH_WEIGHT_TYPE(LOWBIT_CHECK_GRID_CODES)
#undef LOWBIT_CHECK_GRID_CODES
  EXPECT_EQ(formats, 3);  // IQ2_XXS, IQ3_XXS, IQ3_S
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
