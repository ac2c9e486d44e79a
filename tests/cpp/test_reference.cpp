// The C++ CPU reference API: linear against direct computation, MX codes, argument errors (the MoE
// and every type of linear: test_reference_layers.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "lowbit/cpu.h"
#include "lowbit/error.h"
#include "lowbit/formats/all.h"
#include "test_support.h"

namespace lowbit {
namespace {

using test::error_message;
using test::random_weight;

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

WeightView view_of(const std::vector<uint8_t>& w, QuantType t, int64_t k) {
  WeightView v;
  v.data = w.data();
  v.row_stride = row_bytes(t, k);
  return v;
}

TEST(CpuLinear, MatchesDoubleDotProductsOfTheDecodedRows) {
  std::mt19937 rng(std::random_device{}());
  const int64_t m = 3, n = 7, k = 512;
  const QuantType t = QuantType::IQ3_S;
  const auto w = random_weight(t, n, k, rng);
  const auto x = random_floats(m * k, rng);
  const auto bias = random_floats(n, rng);
  std::vector<float> dense(n * k), y(m * n);
  cpu::dequantize(t, view_of(w, t, k), n, k, dense.data(), FloatType::F32, k);
  cpu::linear(x.data(), m, t, view_of(w, t, k), n, k, bias.data(), y.data());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = bias[j];
      for (int64_t c = 0; c < k; ++c) s += static_cast<double>(x[i * k + c]) * dense[j * k + c];
      EXPECT_EQ(y[i * n + j], static_cast<float>(s));
    }
}

TEST(CpuQuantize, Mxfp8CodesAndScales) {
  std::vector<float> x(32, 0.0f);
  x[0] = 448.0f;
  x[1] = 1.0f;
  x[2] = -2.0f;
  x[3] = 500.0f;
  std::vector<uint8_t> data(32), scales(1);
  cpu::quantize(QuantType::MXFP8_E4M3, x.data(), 1, 32, ScaleRule::kOcpFloor, data.data(), scales.data());
  EXPECT_EQ(scales[0], 127);
  EXPECT_EQ(data[0], 0x7E);
  EXPECT_EQ(data[1], 0x38);
  EXPECT_EQ(data[2], 0xC0);
  EXPECT_EQ(data[3], 0x7E);  // saturated
  cpu::quantize(QuantType::MXFP8_E4M3, x.data(), 1, 32, ScaleRule::kRoundUp, data.data(), scales.data());
  EXPECT_EQ(scales[0], 128);
}

TEST(CpuErrors, NameTheArgument) {
  std::vector<uint8_t> w(136 * 2);
  std::vector<float> out(512);
  WeightView v;
  v.data = w.data();
  v.row_stride = 136;
  EXPECT_NE(error_message([&] {
              cpu::dequantize(QuantType::IQ4_XS, v, 1, 300, out.data(), FloatType::F32, 300);
            }).find("k: K = 300 must be a positive multiple of 256"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              cpu::dequantize(QuantType::Q8_1, v, 1, 32, out.data(), FloatType::F32, 32);
            }).find("activation format"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              cpu::quantize(QuantType::IQ2_XXS, out.data(), 1, 256, ScaleRule::kOcpFloor, w.data(), nullptr);
            }).find("qtype: lowbit has no quantizer for iq2_xxs"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              cpu::quantize(QuantType::MXFP8_E4M3, out.data(), 1, 32, ScaleRule::kOcpFloor, w.data(), nullptr);
            }).find("scales:"),
            std::string::npos);
  WeightView split;
  split.data = w.data();
  split.row_stride = 32;
  EXPECT_NE(error_message([&] {
              cpu::dequantize(QuantType::MXFP8_E4M3, split, 1, 32, out.data(), FloatType::F32, 32);
            }).find("scales:"),
            std::string::npos);
}

}  // namespace
}  // namespace lowbit
