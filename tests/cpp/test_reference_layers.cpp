// cpu::linear and cpu::fused_moe (the public C++ reference) against a double-precision reference
// written again here: the weights decoded once as plain 2-D matrices (cpu::dequantize, which the
// decoder tests check bit for bit), then the layer's maths term by term. Every weight type for
// linear; pure and mixed type pairs, each activation, invalid (-1, >= E), non-local (expert_begin)
// and repeated expert ids for the MoE.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "lowbit/cpu.h"
#include "lowbit/formats/all.h"
#include "test_support.h"

namespace lowbit {
namespace {

// A random quantized weight of `experts` x `rows` rows of k weights (experts = 1: a 2-D weight),
// with E8M0 scales near 2^-5..2^1 for the split MX types.
struct TestWeight {
  QuantType type;
  int64_t experts, rows, k;
  std::vector<uint8_t> data, scales;

  TestWeight(QuantType t, int64_t experts_, int64_t rows_, int64_t k_, std::mt19937& rng)
      : type(t), experts(experts_), rows(rows_), k(k_) {
    data = test::random_weight(t, experts * rows, k, rng);
    const int64_t per_row = scales_per_row(t, k);
    scales.resize(static_cast<size_t>(experts * rows * per_row));
    for (auto& s : scales) s = static_cast<uint8_t>(122 + rng() % 7);
  }

  WeightView view() const {
    WeightView v;
    v.data = data.data();
    v.row_stride = row_bytes(type, k);
    v.expert_stride = rows * v.row_stride;
    if (!scales.empty()) {
      v.scales = scales.data();
      v.scale_row_stride = scales_per_row(type, k);
      v.scale_expert_stride = rows * v.scale_row_stride;
    }
    return v;
  }

  // All experts' rows as one [experts * rows, k] matrix of doubles, decoded as a 2-D weight.
  std::vector<double> decoded() const {
    std::vector<float> f(static_cast<size_t>(experts * rows * k));
    cpu::dequantize(type, view(), experts * rows, k, f.data(), FloatType::F32, k);
    return std::vector<double>(f.begin(), f.end());
  }
};

std::vector<float> normal_floats(size_t n, float scale, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

// The activations from their definitions: x * sigmoid(x), x * Phi(x), and the tanh form of GELU.
double silu_ref(double v) {
  return v * (1.0 / (1.0 + std::exp(-v)));
}
double gelu_ref(double v) {
  return 0.5 * v * std::erfc(-v * std::sqrt(0.5));
}
double gelu_tanh_ref(double v) {
  const double c = std::sqrt(2.0) / std::sqrt(std::acos(-1.0));
  return 0.5 * v * (1.0 + std::tanh(c * (v + 0.044715 * v * v * v)));
}
double activation_ref(Activation a, double v) {
  switch (a) {
    case Activation::kSiLU:
      return silu_ref(v);
    case Activation::kGELU:
      return gelu_ref(v);
    case Activation::kGELUTanh:
      return gelu_tanh_ref(v);
  }
  ADD_FAILURE() << "unknown activation";
  return 0.0;
}

// |got - ref| <= tol * ref_scale elementwise, where ref_scale is the root mean square of ref (both
// sides accumulate in double; only float rounding of the outputs and summation order differ).
void expect_close(const std::vector<float>& got, const std::vector<double>& ref, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size());
  double sq = 0.0;
  for (double r : ref) sq += r * r;
  const double scale = std::sqrt(sq / static_cast<double>(std::max<size_t>(ref.size(), 1)));
  ASSERT_GT(scale, 0.0) << what << ": the reference is all zeros, the check would prove nothing";
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - ref[i]);
    if (!(err <= tol * scale + 1e-7 * std::fabs(ref[i])) && reported++ < 5)
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", reference " << ref[i];
  }
}

TEST(CpuLinearReference, EveryTypeWithAndWithoutBias) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(seed);  // reproduces a failure
  std::mt19937 rng(seed);
  int types = 0;
  for (const TypeInfo& info : all_types()) {
    if (!info.is_weight) continue;
    ++types;
    const QuantType t = info.type;
    const int64_t m = 3, n = 11, k = 2 * std::max<int64_t>(256, info.block_elems) + info.block_elems;
    const TestWeight w(t, 1, n, k, rng);
    const std::vector<double> W = w.decoded();
    const auto x = normal_floats(static_cast<size_t>(m * k), 1.0f, rng);
    // a bias as large as x W^T itself (W's rows have norms near sqrt(k) * |w|)
    double w_rms = 0.0;
    for (double v : W) w_rms += v * v;
    w_rms = std::sqrt(w_rms / static_cast<double>(W.size()));
    const auto bias = normal_floats(static_cast<size_t>(n), static_cast<float>(w_rms * std::sqrt(double(k))), rng);
    for (const bool with_bias : {false, true}) {
      std::vector<float> y(static_cast<size_t>(m * n), std::nanf(""));
      cpu::linear(x.data(), m, t, w.view(), n, k, with_bias ? bias.data() : nullptr, y.data());
      std::vector<double> ref(static_cast<size_t>(m * n));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = with_bias ? static_cast<double>(bias[j]) : 0.0;
          for (int64_t c = k - 1; c >= 0; --c) s += static_cast<double>(x[i * k + c]) * W[j * k + c];
          ref[i * n + j] = s;
        }
      expect_close(y, ref, 1e-6, std::string(info.name) + (with_bias ? " with bias" : " without bias"));
    }
  }
  EXPECT_EQ(types, 14);
}

TEST(CpuLinearReference, NoTokensWritesNothing) {
  std::mt19937 rng(7);
  const TestWeight w(QuantType::IQ4_NL, 1, 5, 64, rng);
  cpu::linear(nullptr, 0, QuantType::IQ4_NL, w.view(), 5, 64, nullptr, nullptr);
}

struct MoeCase {
  QuantType w13_type, w2_type;
  Activation activation;
  int64_t expert_begin;
};

// The MoE written again: out[t] = sum over slots j with a local id e of
// topk_weights[t, j] * W2[e] (act(W13[e] x_t)[:I] * (W13[e] x_t)[I:]).
std::vector<double> moe_reference(const std::vector<float>& x, int64_t tokens, const std::vector<double>& W13,
                                  const std::vector<double>& W2, int64_t E, int64_t H, int64_t I, Activation act,
                                  int64_t begin, const std::vector<float>& weights, const std::vector<int64_t>& ids,
                                  int64_t top_k) {
  std::vector<double> out(static_cast<size_t>(tokens * H), 0.0);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < top_k; ++j) {
      const int64_t e = ids[t * top_k + j] - begin;
      if (e < 0 || e >= E) continue;
      std::vector<double> gate(I), up(I);
      for (int64_t r = 0; r < I; ++r) {
        double g = 0.0, u = 0.0;
        for (int64_t c = 0; c < H; ++c) {
          g += W13[(e * 2 * I + r) * H + c] * x[t * H + c];
          u += W13[(e * 2 * I + I + r) * H + c] * x[t * H + c];
        }
        gate[r] = g, up[r] = u;
      }
      for (int64_t r = 0; r < H; ++r) {
        double s = 0.0;
        for (int64_t c = 0; c < I; ++c) s += W2[(e * H + r) * I + c] * (activation_ref(act, gate[c]) * up[c]);
        out[t * H + r] += static_cast<double>(weights[t * top_k + j]) * s;
      }
    }
  return out;
}

std::string moe_case_name(const ::testing::TestParamInfo<MoeCase>& p) {
  static const char* const kActivations[] = {"silu", "gelu", "gelu_tanh"};
  return std::string(type_name(p.param.w13_type)) + "_" + type_name(p.param.w2_type) + "_" +
         kActivations[static_cast<int>(p.param.activation)] + "_begin" + std::to_string(p.param.expert_begin);
}

class CpuMoeReference : public ::testing::TestWithParam<MoeCase> {};

TEST_P(CpuMoeReference, MatchesTheLayerWrittenAgain) {
  const MoeCase c = GetParam();
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(seed);
  std::mt19937 rng(seed);
  const int64_t E = 5, H = 256, I = 256, tokens = 9, top_k = 3, begin = c.expert_begin;
  const TestWeight w13(c.w13_type, E, 2 * I, H, rng), w2(c.w2_type, E, H, I, rng);
  cpu::MoeLayer layer{c.w13_type, w13.view(), c.w2_type, w2.view(), E, H, I, c.activation, begin};
  // x scaled so that the activations see their non-linear range (gate values of order one)
  const auto x = normal_floats(static_cast<size_t>(tokens * H), 8.0f, rng);
  // Ids per token: every local expert (the last included), ids below the local range (other ranks'
  // or, with begin = 0, negative), -1, past the last expert (begin + E, far past) and a repeated one.
  const int64_t last = begin + E - 1;
  const std::vector<int64_t> ids = {
      begin,     begin + 1, begin + 2,      // token 0: the first three local experts
      -1,        last,      begin + E,      // token 1: -1, the last expert, one past the last
      begin - 1, -1,        1000,           // token 2: nothing local (all zeros)
      last,      begin + 3, begin + 1,      //
      begin + 3, begin + 3, -1,             // token 4: one expert in two slots
      begin + E, -1,        begin - 3,      // token 5: nothing local (all zeros)
      begin + 2, last,      begin,          //
      last,      -7,        begin + E + 5,  // token 7: the last expert alone
      begin + 1, begin + 4, begin + 2,      //
  };
  std::vector<float> weights(static_cast<size_t>(tokens * top_k));
  std::uniform_real_distribution<float> uniform(0.1f, 1.0f);
  for (auto& v : weights) v = uniform(rng);
  std::vector<float> out(static_cast<size_t>(tokens * H), std::nanf(""));
  cpu::fused_moe(x.data(), tokens, layer, weights.data(), ids.data(), top_k, out.data());
  const auto ref =
      moe_reference(x, tokens, w13.decoded(), w2.decoded(), E, H, I, c.activation, begin, weights, ids, top_k);
  expect_close(out, ref, 1e-6, std::string(type_name(c.w13_type)) + " / " + type_name(c.w2_type));
  for (const int64_t t : {2, 5})  // tokens whose ids are all invalid or not local: exact zeros
    for (int64_t r = 0; r < H; ++r) ASSERT_EQ(out[t * H + r], 0.0f) << "token " << t << " element " << r;
  // the last expert alone (token 7) is a real share of its output: a dropped expert shows
  double norm7 = 0.0;
  for (int64_t r = 0; r < H; ++r) norm7 += std::fabs(out[7 * H + r]);
  EXPECT_GT(norm7, 0.0);
}

INSTANTIATE_TEST_SUITE_P(TypesAndActivations, CpuMoeReference,
                         ::testing::Values(MoeCase{QuantType::IQ2_XXS, QuantType::IQ2_XXS, Activation::kSiLU, 0},
                                           MoeCase{QuantType::IQ3_S, QuantType::Q5_0, Activation::kSiLU, 3},
                                           MoeCase{QuantType::IQ4_XS, QuantType::Q8_0, Activation::kGELU, 0},
                                           MoeCase{QuantType::IQ1_M, QuantType::IQ4_NL, Activation::kGELUTanh, 10},
                                           MoeCase{QuantType::MXFP8_E4M3, QuantType::MXFP4_SPLIT, Activation::kGELU, 5},
                                           MoeCase{QuantType::MXFP4, QuantType::IQ3_XXS, Activation::kGELUTanh, 0},
                                           MoeCase{QuantType::IQ2_S, QuantType::MXFP8_E4M3, Activation::kSiLU, 8}),
                         moe_case_name);

TEST(CpuMoeReference, ActivationsAreTheirDefinitions) {
  for (double v : {-6.0, -1.5, -0.25, 0.0, 0.3, 1.0, 2.5, 7.0}) {
    EXPECT_NEAR(cpu::activate(Activation::kSiLU, v), silu_ref(v), 1e-14) << v;
    EXPECT_NEAR(cpu::activate(Activation::kGELU, v), gelu_ref(v), 1e-14) << v;
    EXPECT_NEAR(cpu::activate(Activation::kGELUTanh, v), gelu_tanh_ref(v), 1e-14) << v;
  }
  // the tanh form stays within 1e-3 of the exact GELU (a wrong constant would not)
  for (double v = -4.0; v <= 4.0; v += 0.125) EXPECT_NEAR(gelu_tanh_ref(v), gelu_ref(v), 1e-3) << v;
}

}  // namespace
}  // namespace lowbit
