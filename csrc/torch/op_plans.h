// Argument checking and output shapes of each op, shared by its CPU, CUDA and Meta kernels so
// that every backend accepts and rejects exactly the same calls.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <vector>

#include "lowbit/cpu.h"
#include "lowbit/dispatch.h"
#include "tensor_args.h"

namespace lowbit::torch_ops {

struct DequantizePlan {
  WeightArg w;
  at::ScalarType dtype;
  std::vector<int64_t> out_shape;  // [N, K] or [E, N, K]
};
DequantizePlan plan_dequantize(const at::Tensor& w, int64_t qtype, int64_t k, const std::optional<at::Tensor>& scales,
                               std::optional<at::ScalarType> dtype);

struct LinearPlan {
  WeightArg w;
  int64_t m;                       // rows of x once its leading dims are flattened
  std::vector<int64_t> out_shape;  // x.shape[:-1] + [N]
  MmvqMath math = MmvqMath::kAuto;
};
LinearPlan plan_linear(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const std::optional<at::Tensor>& scales,
                       const std::optional<at::Tensor>& bias);

// linear's rules plus MMVQ's: x must be [M, K] with 1 <= M <= 16; math "auto", "bf16" or "int8"
// (int8: M <= 8 and a type with an int8 form).
LinearPlan plan_mmvq(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const std::optional<at::Tensor>& scales,
                     c10::string_view math);

// linear's rules without a bias, for mmq: x [..., K] with at least one token; math "auto", "bf16"
// or "int8" (a type mmq_int8_supported names).
LinearPlan plan_mmq(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const std::optional<at::Tensor>& scales,
                    c10::string_view math);

struct QuantizePlan {
  const TypeInfo* info;
  ScaleRule rule;
  int64_t rows, k;
  std::vector<int64_t> data_shape, scales_shape;  // scales_shape is [0] for GGUF types
};
QuantizePlan plan_quantize(const at::Tensor& w, int64_t qtype, int64_t scale_rule);

struct FusedMoePlan {
  WeightArg w13, w2;
  int64_t tokens = 0, top_k = 0, hidden = 0, intermediate = 0, local_experts = 0, expert_begin = 0;
  Activation activation{};
};
FusedMoePlan plan_fused_moe(const at::Tensor& x, const at::Tensor& w13, const at::Tensor& w2,
                            const at::Tensor& topk_weights, const at::Tensor& topk_ids, int64_t w13_type,
                            int64_t w2_type, c10::string_view activation, const std::optional<at::Tensor>& w13_scales,
                            const std::optional<at::Tensor>& w2_scales, at::OptionalIntArrayRef expert_range);

}  // namespace lowbit::torch_ops
