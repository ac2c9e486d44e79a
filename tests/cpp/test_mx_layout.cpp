// Layout conversions of lowbit/mx_layout.h: Ascend scale pairing and GGUF <-> split MXFP4 nibble order.
#include "lowbit/mx_layout.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "lowbit/error.h"

namespace {

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(byte(gen));
  return v;
}

// Element i (0..31) of a split MXFP4 block: even elements in low nibbles.
int split_code(const uint8_t* block, int i) {
  return (block[i / 2] >> (4 * (i & 1))) & 0x0F;
}

// Element j (0..31) of a GGUF MXFP4 block: qs[j] low nibble for j < 16, qs[j - 16] high nibble after.
int gguf_code(const uint8_t* block, int j) {
  const uint8_t* qs = block + 1;
  return j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const lowbit::Error& e) {
    return e.what();
  }
  return "";
}

TEST(MxLayout, ScalesPerRowFollowsWholeBlocks) {
  EXPECT_EQ(lowbit::mx_scales_per_row(32), 1);
  EXPECT_EQ(lowbit::mx_scales_per_row(4096), 128);
  EXPECT_EQ(lowbit::mx_scale_pairs_per_row(1), 1);
  EXPECT_EQ(lowbit::mx_scale_pairs_per_row(3), 2);
  EXPECT_EQ(lowbit::mx_scale_pairs_per_row(4), 2);
  // K = 4304 is 134.5 blocks: no split MX layout for it (Ascend's bf16 fallback case).
  const std::string msg = error_of([] { lowbit::mx_scales_per_row(4304, "weight K"); });
  EXPECT_NE(msg.find("weight K"), std::string::npos) << msg;
  EXPECT_NE(msg.find("multiple of 32"), std::string::npos) << msg;
  EXPECT_THROW(lowbit::mx_scales_per_row(0), lowbit::Error);
  EXPECT_THROW(lowbit::mx_scales_per_row(-32), lowbit::Error);
}

TEST(MxLayout, PairingKeepsBlockOrderAndPadsOddCountsWithZero) {
  for (int64_t per_row : {1, 2, 3, 7, 8, 135}) {
    const int64_t rows = 5, pairs = (per_row + 1) / 2;
    const auto scales = random_bytes(static_cast<size_t>(rows * per_row), 11u + static_cast<uint32_t>(per_row));
    std::vector<uint8_t> paired(static_cast<size_t>(rows * pairs * 2), 0xAB);
    lowbit::pair_mx_scales(scales.data(), paired.data(), rows, per_row);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < per_row; ++j) {
        // Logical block j lives at [r, j / 2, j % 2].
        EXPECT_EQ(paired[r * pairs * 2 + (j / 2) * 2 + j % 2], scales[r * per_row + j])
            << "row " << r << " block " << j;
      }
      if (per_row % 2 == 1) {
        EXPECT_EQ(paired[r * pairs * 2 + pairs * 2 - 1], 0x00) << "padding of row " << r;
      }
    }
    std::vector<uint8_t> back(scales.size(), 0xCD);
    lowbit::unpair_mx_scales(paired.data(), back.data(), rows, per_row);
    EXPECT_EQ(back, scales) << "round trip for K/32 = " << per_row;
  }
}

TEST(MxLayout, UnpairRejectsANonZeroPaddingByte) {
  const int64_t rows = 3, per_row = 5;
  std::vector<uint8_t> paired(static_cast<size_t>(rows * 3 * 2), 0x7F);
  for (int64_t r = 0; r < rows; ++r) paired[r * 6 + 5] = 0x00;
  std::vector<uint8_t> scales(static_cast<size_t>(rows * per_row));
  EXPECT_NO_THROW(lowbit::unpair_mx_scales(paired.data(), scales.data(), rows, per_row));
  paired[2 * 6 + 5] = 0x81;  // row 2 carries a sixth scale: the caller's K (160) is wrong
  const std::string msg = error_of([&] { lowbit::unpair_mx_scales(paired.data(), scales.data(), rows, per_row); });
  EXPECT_NE(msg.find("paired: row 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0x81"), std::string::npos) << msg;
}

TEST(MxLayout, ArgumentsAreChecked) {
  uint8_t buf[4] = {};
  EXPECT_NE(error_of([&] { lowbit::pair_mx_scales(nullptr, buf, 1, 2); }).find("scales"), std::string::npos);
  EXPECT_NE(error_of([&] { lowbit::pair_mx_scales(buf, buf, -1, 2); }).find("rows"), std::string::npos);
  EXPECT_NE(error_of([&] { lowbit::pair_mx_scales(buf, buf, 1, 0); }).find("scales"), std::string::npos);
  EXPECT_NE(error_of([&] { lowbit::mxfp4_gguf_to_split(buf, buf, buf, 1, 48); }).find("k: K = 48"), std::string::npos);
  EXPECT_NE(error_of([&] { lowbit::mxfp4_split_to_gguf(buf, nullptr, buf, 1, 32); }).find("scales"), std::string::npos);
  // An empty batch is fine even with null pointers.
  EXPECT_NO_THROW(lowbit::pair_mx_scales(nullptr, nullptr, 0, 3));
  EXPECT_NO_THROW(lowbit::mxfp4_gguf_to_split(nullptr, nullptr, nullptr, 0, 64));
}

TEST(MxLayout, GgufToSplitReordersNibbles) {
  // One block whose element j carries code j % 16 and whose high half is the reverse, so every
  // element has a distinguishable code and position.
  uint8_t block[17];
  block[0] = 0x7A;
  for (int j = 0; j < 16; ++j) block[1 + j] = static_cast<uint8_t>((j & 0x0F) | ((15 - j) << 4));
  uint8_t elements[16], scale = 0;
  lowbit::mxfp4_gguf_to_split(block, elements, &scale, 1, 32);
  EXPECT_EQ(scale, 0x7A);
  for (int i = 0; i < 32; ++i) {
    const int expected = i < 16 ? i : 31 - i;
    EXPECT_EQ(split_code(elements, i), expected) << "element " << i;
    EXPECT_EQ(gguf_code(block, i), expected) << "element " << i;
  }
  // Split byte 0 holds elements 0 and 1; GGUF byte qs[0] holds elements 0 and 16.
  EXPECT_EQ(elements[0], 0x10);
  EXPECT_EQ(block[1], 0xF0);
}

TEST(MxLayout, GgufSplitRoundTripOverBatchedRows) {
  const int64_t experts = 3, rows = 4, k = 96, blocks = k / 32;
  const auto gguf = random_bytes(static_cast<size_t>(experts * rows * blocks * 17), 7u);
  std::vector<uint8_t> elements(static_cast<size_t>(experts * rows * k / 2));
  std::vector<uint8_t> scales(static_cast<size_t>(experts * rows * blocks));
  lowbit::mxfp4_gguf_to_split(gguf.data(), elements.data(), scales.data(), experts * rows, k);
  for (int64_t b = 0; b < experts * rows * blocks; ++b) {
    EXPECT_EQ(scales[b], gguf[b * 17]);
    for (int i = 0; i < 32; ++i) ASSERT_EQ(split_code(&elements[b * 16], i), gguf_code(&gguf[b * 17], i));
  }
  std::vector<uint8_t> back(gguf.size());
  lowbit::mxfp4_split_to_gguf(elements.data(), scales.data(), back.data(), experts * rows, k);
  EXPECT_EQ(back, gguf);
}

}  // namespace
