// CPU reference linear and MoE layers: decode each weight row once, accumulate in double.
#include <cmath>
#include <vector>

#include "lowbit/cpu.h"
#include "lowbit/error.h"
#include "lowbit/weights.h"

namespace lowbit::cpu {

void linear(const float* x, int64_t m, QuantType t, const WeightView& w, int64_t n, int64_t k, const float* bias,
            float* y) {
  LOWBIT_CHECK(m >= 0 && n >= 0, "x/w: M = ", m, " and N = ", n, " must be >= 0");
  const int64_t bytes = row_bytes(t, k, "k");
  LOWBIT_CHECK(m == 0 || (x != nullptr && y != nullptr), "x/y: null pointer");
  LOWBIT_CHECK(w.row_stride >= bytes || n <= 1, "w: row stride ", w.row_stride, " is shorter than a row (", bytes,
               " bytes)");
  LOWBIT_CHECK(!weight_type_info(static_cast<int64_t>(t)).split_scales || w.scale_row_stride >= k / 32 || n <= 1,
               "scales: row stride ", w.scale_row_stride, " is shorter than a row of scales (K/32 = ", k / 32, ")");
  std::vector<float> row(static_cast<size_t>(k));
  std::vector<double> acc(static_cast<size_t>(m));
  for (int64_t j = 0; j < n; ++j) {
    WeightView one = w;
    one.data = static_cast<const uint8_t*>(w.data) + j * w.row_stride;
    one.scales = w.scales ? w.scales + j * w.scale_row_stride : nullptr;
    dequantize(t, one, 1, k, row.data(), FloatType::F32, k);
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * k;
      double s = 0.0;
      for (int64_t c = 0; c < k; ++c) s += static_cast<double>(xi[c]) * row[c];
      acc[i] = s + (bias ? static_cast<double>(bias[j]) : 0.0);
    }
    for (int64_t i = 0; i < m; ++i) y[i * n + j] = static_cast<float>(acc[i]);
  }
}

double activate(Activation a, double v) {
  switch (a) {
    case Activation::kSiLU:
      return v / (1.0 + std::exp(-v));
    case Activation::kGELU:
      return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    case Activation::kGELUTanh: {
      const double c = std::sqrt(2.0 / 3.14159265358979323846);
      return 0.5 * v * (1.0 + std::tanh(c * (v + 0.044715 * v * v * v)));
    }
  }
  detail::fail("activation: unknown activation ", static_cast<int>(a));
}

namespace {
std::vector<float> dequantize_expert(QuantType t, const WeightView& w, int64_t e, int64_t rows, int64_t k) {
  WeightView one = w;
  one.data = static_cast<const uint8_t*>(w.data) + e * w.expert_stride;
  one.scales = w.scales ? w.scales + e * w.scale_expert_stride : nullptr;
  std::vector<float> out(static_cast<size_t>(rows * k));
  dequantize(t, one, rows, k, out.data(), FloatType::F32, k);
  return out;
}
}  // namespace

void fused_moe(const float* x, int64_t tokens, const MoeLayer& L, const float* topk_weights, const int64_t* topk_ids,
               int64_t top_k, float* out) {
  const int64_t H = L.hidden, I = L.intermediate, E = L.local_experts;
  LOWBIT_CHECK(tokens >= 0 && top_k >= 0, "topk_ids: tokens and top_k must be >= 0");
  LOWBIT_CHECK(H > 0 && I > 0 && E >= 0, "w13/w2: hidden, intermediate and expert counts must be positive");
  std::vector<double> acc(static_cast<size_t>(tokens * H), 0.0);
  std::vector<double> h(static_cast<size_t>(2 * I)), a(static_cast<size_t>(I));
  for (int64_t e = 0; e < E; ++e) {
    const int64_t global = L.expert_begin + e;
    bool used = false;
    for (int64_t p = 0; p < tokens * top_k && !used; ++p) used = topk_ids[p] == global;
    if (!used) continue;
    const std::vector<float> w13 = dequantize_expert(L.w13_type, L.w13, e, 2 * I, H);
    const std::vector<float> w2 = dequantize_expert(L.w2_type, L.w2, e, H, I);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t j = 0; j < top_k; ++j) {
        if (topk_ids[t * top_k + j] != global) continue;
        const float* xt = x + t * H;
        for (int64_t r = 0; r < 2 * I; ++r) {
          double s = 0.0;
          for (int64_t c = 0; c < H; ++c) s += static_cast<double>(w13[r * H + c]) * xt[c];
          h[r] = s;
        }
        for (int64_t r = 0; r < I; ++r) a[r] = activate(L.activation, h[r]) * h[I + r];
        const double weight = topk_weights[t * top_k + j];
        for (int64_t r = 0; r < H; ++r) {
          double s = 0.0;
          for (int64_t c = 0; c < I; ++c) s += static_cast<double>(w2[r * I + c]) * a[c];
          acc[t * H + r] += weight * s;
        }
      }
    }
  }
  for (int64_t i = 0; i < tokens * H; ++i) out[i] = static_cast<float>(acc[i]);
}

}  // namespace lowbit::cpu
