// The C++ API rejects bad input with lowbit::Error naming the argument (the 2026-12 review's cases),
// and split MXFP4's code 0b1000 decodes to -0.0 as OCP MX defines it.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "lowbit/cpu.h"
#include "lowbit/dispatch.h"
#include "test_support.h"

namespace lowbit {
namespace {

using test::error_message;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(BadInput, LinearRejectsANegativeK) {
  std::mt19937 rng(7);
  const std::vector<uint8_t> w = test::random_weight(QuantType::IQ4_NL, 2, 64, rng);
  const WeightView view{w.data(), row_bytes(QuantType::IQ4_NL, 64)};
  std::vector<float> x(64, 1.0f), y(2, 0.0f);
  const std::string msg =
      error_message([&] { cpu::linear(x.data(), 1, QuantType::IQ4_NL, view, 2, -1, nullptr, y.data()); });
  EXPECT_TRUE(contains(msg, "k: K = -1 must be a positive multiple of 32")) << msg;
}

TEST(BadInput, LinearRejectsARowStrideShorterThanARow) {
  std::mt19937 rng(8);
  const std::vector<uint8_t> w = test::random_weight(QuantType::IQ4_NL, 2, 64, rng);
  std::vector<float> x(64, 1.0f), y(2, 0.0f);
  const WeightView zero_stride{w.data(), 0};
  const std::string msg =
      error_message([&] { cpu::linear(x.data(), 1, QuantType::IQ4_NL, zero_stride, 2, 64, nullptr, y.data()); });
  EXPECT_TRUE(contains(msg, "w: row stride 0 is shorter than a row (36 bytes)")) << msg;
  // one row needs no stride
  const WeightView one_row{w.data(), 0};
  EXPECT_EQ(error_message([&] { cpu::linear(x.data(), 1, QuantType::IQ4_NL, one_row, 1, 64, nullptr, y.data()); }),
            "no error");
}

TEST(BadInput, SelectDenseChecksTheShape) {
  const DeviceFacts cpu{};
  std::string msg = error_message([&] { select_dense(QuantType::IQ4_NL, 0, -1, 33, cpu); });
  EXPECT_TRUE(contains(msg, "n: N = -1 must be >= 0")) << msg;
  msg = error_message([&] { select_dense(QuantType::IQ4_NL, 0, 8, 33, cpu); });
  EXPECT_TRUE(contains(msg, "k: K = 33 must be a positive multiple of 32")) << msg;
  msg = error_message([&] { select_dense(QuantType::IQ4_NL, -1, 8, 32, cpu); });
  EXPECT_TRUE(contains(msg, "m: M = -1 must be >= 0")) << msg;
  EXPECT_EQ(select_dense(QuantType::IQ4_NL, 0, 8, 32, cpu).kernel, DenseKernel::kCpuReference);
}

TEST(BadInput, Q8QuantizeRejectsAnOverflowingScale) {
  std::vector<float> x(64, 0.25f);
  x[33] = -9.0e6f;  // 9e6 / 127 exceeds float16's 65504
  std::vector<uint8_t> data(2 * 36);
  for (QuantType t : {QuantType::Q8_0, QuantType::Q8_1}) {
    const std::string msg =
        error_message([&] { cpu::quantize(t, x.data(), 1, 64, ScaleRule::kOcpFloor, data.data(), nullptr); });
    EXPECT_TRUE(contains(msg, "w: row 0 block 1 reaches")) << msg;
    EXPECT_TRUE(contains(msg, "float16 scale overflows")) << msg;
  }
}

TEST(BadInput, SplitMxfp4CodeEightIsNegativeZero) {
  // elements 0..3: codes 0b1000 (-0), 0b0000 (+0), 0b1001 (-0.5), 0b0001 (+0.5)
  std::vector<uint8_t> elements(16, 0);
  elements[0] = 0x08;
  elements[1] = 0x19;
  const uint8_t scale = 127;  // 2^0
  WeightView view{elements.data(), 16};
  view.scales = &scale;
  view.scale_row_stride = 1;
  std::vector<float> out(32, 1.0f);
  cpu::dequantize(QuantType::MXFP4_SPLIT, view, 1, 32, out.data(), FloatType::F32, 32);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_TRUE(std::signbit(out[0]));
  EXPECT_FALSE(std::signbit(out[1]));
  EXPECT_EQ(out[2], -0.5f);
  EXPECT_EQ(out[3], 0.5f);
}

}  // namespace
}  // namespace lowbit
