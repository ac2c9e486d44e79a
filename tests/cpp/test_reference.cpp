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

// Q8_0 and Q5_0 decoded from their definitions (ggml's block_q8_0 / block_q5_0), apart from
// the gguf-py comparison: d * q, and d * ((low nibble | fifth bit << 4) - 16) with weight j's
// nibble the low one of byte j (j < 16) or the high one of byte j - 16, its fifth bit bit j of qh.
TEST(CpuDequantize, Q8_0AndQ5_0AreTheirDefinitions) {
  std::mt19937 rng(std::random_device{}());
  const int64_t rows = 4, k = 32 * 40;
  for (const QuantType t : {QuantType::Q8_0, QuantType::Q5_0}) {
    const auto w = random_weight(t, rows, k, rng);
    std::vector<float> out(rows * k);
    cpu::dequantize(t, view_of(w, t, k), rows, k, out.data(), FloatType::F32, k);
    const size_t block_bytes = t == QuantType::Q8_0 ? 34 : 22;
    for (size_t b = 0; b < w.size() / block_bytes; ++b) {
      const uint8_t* p = w.data() + b * block_bytes;
      const float d = fp16_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8)));
      const uint32_t qh = static_cast<uint32_t>(p[2]) | (static_cast<uint32_t>(p[3]) << 8) |
                          (static_cast<uint32_t>(p[4]) << 16) | (static_cast<uint32_t>(p[5]) << 24);
      for (int j = 0; j < 32; ++j) {
        float expected;
        if (t == QuantType::Q8_0) {
          expected = d * static_cast<float>(static_cast<int8_t>(p[2 + j]));
        } else {
          const int low = j < 16 ? (p[6 + j] & 0xF) : (p[6 + j - 16] >> 4);
          expected = d * static_cast<float>((low | static_cast<int>(((qh >> j) & 1u) << 4)) - 16);
        }
        ASSERT_EQ(out[b * 32 + j], expected) << type_name(t) << " block " << b << " weight " << j;
      }
    }
  }
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
