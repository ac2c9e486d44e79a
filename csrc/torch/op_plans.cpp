#include "op_plans.h"

#include <c10/util/Exception.h>

#include "lowbit/cuda_limits.h"
#include "lowbit/mmq_policy.h"

namespace lowbit::torch_ops {

DequantizePlan plan_dequantize(const at::Tensor& w, int64_t qtype, int64_t k, const std::optional<at::Tensor>& scales,
                               std::optional<at::ScalarType> dtype) {
  DequantizePlan p{weight_arg(w, qtype, k, scales, "w", "scales", /*allow_3d=*/true), dtype.value_or(at::kFloat), {}};
  TORCH_CHECK_VALUE(p.dtype == at::kFloat || p.dtype == at::kBFloat16 || p.dtype == at::kHalf,
                    "dtype must be torch.float32, torch.bfloat16 or torch.float16, got ", p.dtype);
  if (w.dim() == 3) p.out_shape.push_back(p.w.experts);  // E may be 0
  p.out_shape.push_back(p.w.rows);
  p.out_shape.push_back(p.w.k);
  return p;
}

LinearPlan plan_linear(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const std::optional<at::Tensor>& scales,
                       const std::optional<at::Tensor>& bias) {
  LinearPlan p{weight_arg(w, qtype, -1, scales, "w", "scales", /*allow_3d=*/false), 0, {}};
  check_activation(x, "x", w, "w");
  TORCH_CHECK_VALUE(x.dim() >= 1 && x.size(-1) == p.w.k, "x must have shape [..., K] with K = ", p.w.k,
                    " (from w's rows), got ", x.sizes());
  if (bias.has_value()) {
    check_same_device(*bias, "bias", w, "w");
    TORCH_CHECK_VALUE(bias->dim() == 1 && bias->size(0) == p.w.rows, "bias must have shape [N] = [", p.w.rows,
                      "], got ", bias->sizes());
    TORCH_CHECK_VALUE(at::isFloatingType(bias->scalar_type()), "bias must be a floating tensor, got ",
                      bias->scalar_type());
  }
  p.m = x.numel() / p.w.k;
  p.out_shape = x.sizes().vec();
  p.out_shape.back() = p.w.rows;
  return p;
}

LinearPlan plan_mmvq(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const std::optional<at::Tensor>& scales,
                     c10::string_view math) {
  LinearPlan p = plan_linear(x, w, qtype, scales, std::nullopt);
  TORCH_CHECK_VALUE(x.dim() == 2 && x.size(0) >= 1 && x.size(0) <= kMmvqMaxTokens,
                    "x must be [M, K] with 1 <= M <= ", kMmvqMaxTokens, " for mmvq, got shape ", x.sizes());
  p.math = translate_errors([&] { return parse_mmvq_math(std::string(math), "math"); });
  TORCH_CHECK_VALUE(p.math != MmvqMath::kInt8 || mmvq_int8_supported(p.w.type, p.m),
                    "math: \"int8\" serves M <= ", kMmvqInt8MaxTokens, " tokens of every type but mxfp8_e4m3; got ",
                    type_name(p.w.type), " with M = ", p.m);
  return p;
}

LinearPlan plan_mmq(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const std::optional<at::Tensor>& scales,
                    c10::string_view math) {
  LinearPlan p = plan_linear(x, w, qtype, scales, std::nullopt);
  TORCH_CHECK_VALUE(p.m >= 1, "x must hold at least one token for mmq, got shape ", x.sizes());
  p.math = translate_errors([&] { return parse_mmvq_math(std::string(math), "math"); });
  translate_errors([&] { check_mmq_math(p.w.type, p.math, "MMQ"); });
  return p;
}

QuantizePlan plan_quantize(const at::Tensor& w, int64_t qtype, int64_t scale_rule) {
  const TypeInfo* info = find_type(qtype);
  TORCH_CHECK_VALUE(info != nullptr, "qtype: ", qtype, " is not a quant type id lowbit knows");
  TORCH_CHECK_VALUE(info->has_quantizer, "qtype: lowbit has no quantizer for ", info->name,
                    " (it quantizes to mxfp8_e4m3, mxfp4_split, mxfp4, q8_0 and q8_1)");
  TORCH_CHECK_VALUE(scale_rule == 0 || scale_rule == 1, "scale_rule must be 0 (\"ocp\") or 1 (\"round_up\"), got ",
                    scale_rule);
  TORCH_CHECK_VALUE(at::isFloatingType(w.scalar_type()), "w must be a floating tensor, got ", w.scalar_type());
  TORCH_CHECK_VALUE(w.dim() >= 1, "w must have shape [..., K], got a scalar");
  QuantizePlan p{info, static_cast<ScaleRule>(scale_rule), 0, w.size(-1), {}, {}};
  TORCH_CHECK_VALUE(p.k > 0 && p.k % info->block_elems == 0, "w: K = ", p.k, " (its last dim) must be a positive ",
                    "multiple of ", info->block_elems, " to quantize to ", info->name);
  p.rows = w.numel() / p.k;
  p.data_shape = w.sizes().vec();
  p.data_shape.back() = p.k / info->block_elems * info->block_bytes;
  if (info->split_scales) {
    p.scales_shape = w.sizes().vec();
    p.scales_shape.back() = p.k / 32;
  } else {
    p.scales_shape = {0};
  }
  return p;
}

namespace {
Activation parse_activation(c10::string_view name) {
  if (name == "silu") return Activation::kSiLU;
  if (name == "gelu") return Activation::kGELU;
  if (name == "gelu_tanh") return Activation::kGELUTanh;
  TORCH_CHECK_VALUE(false, "activation must be \"silu\", \"gelu\" or \"gelu_tanh\", got \"", std::string(name), "\"");
}
}  // namespace

FusedMoePlan plan_fused_moe(const at::Tensor& x, const at::Tensor& w13, const at::Tensor& w2,
                            const at::Tensor& topk_weights, const at::Tensor& topk_ids, int64_t w13_type,
                            int64_t w2_type, c10::string_view activation, const std::optional<at::Tensor>& w13_scales,
                            const std::optional<at::Tensor>& w2_scales, at::OptionalIntArrayRef expert_range) {
  TORCH_CHECK_VALUE(w13.dim() == 3, "w13 must be 3-D [E, 2I, row_bytes], got shape ", w13.sizes());
  TORCH_CHECK_VALUE(w2.dim() == 3, "w2 must be 3-D [E, H, row_bytes], got shape ", w2.sizes());
  FusedMoePlan p{weight_arg(w13, w13_type, -1, w13_scales, "w13", "w13_scales", true, "w13_type"),
                 weight_arg(w2, w2_type, -1, w2_scales, "w2", "w2_scales", true, "w2_type")};
  p.activation = parse_activation(activation);
  check_activation(x, "x", w13, "w13");
  check_same_device(w2, "w2", w13, "w13");
  check_same_device(topk_weights, "topk_weights", w13, "w13");
  check_same_device(topk_ids, "topk_ids", w13, "w13");
  TORCH_CHECK_VALUE(x.dim() == 2, "x must be 2-D [T, H], got shape ", x.sizes());
  p.tokens = x.size(0);
  p.hidden = x.size(1);
  p.local_experts = p.w13.experts;
  TORCH_CHECK_VALUE(p.w13.k == p.hidden, "w13 rows hold K = ", p.w13.k, " weights but x has H = ", p.hidden);
  TORCH_CHECK_VALUE(p.w13.rows % 2 == 0, "w13 must have an even number of rows (gate then up), got ", p.w13.rows);
  p.intermediate = p.w13.rows / 2;
  TORCH_CHECK_VALUE(p.w2.experts == p.local_experts, "w2 has ", p.w2.experts, " experts but w13 has ", p.local_experts);
  TORCH_CHECK_VALUE(p.w2.rows == p.hidden && p.w2.k == p.intermediate, "w2 must be [E, H, I] = [", p.local_experts,
                    ", ", p.hidden, ", ", p.intermediate, "] in weights, got [", p.w2.experts, ", ", p.w2.rows, ", ",
                    p.w2.k, "]");
  TORCH_CHECK_VALUE(topk_ids.scalar_type() == at::kInt || topk_ids.scalar_type() == at::kLong,
                    "topk_ids must be int32 or int64, got ", topk_ids.scalar_type());
  TORCH_CHECK_VALUE(topk_ids.dim() == 2 && topk_ids.size(0) == p.tokens,
                    "topk_ids must have shape [T, top_k] with T = ", p.tokens, ", got ", topk_ids.sizes());
  p.top_k = topk_ids.size(1);
  TORCH_CHECK_VALUE(topk_weights.sizes() == topk_ids.sizes(), "topk_weights must have the shape of topk_ids ",
                    topk_ids.sizes(), ", got ", topk_weights.sizes());
  TORCH_CHECK_VALUE(at::isFloatingType(topk_weights.scalar_type()), "topk_weights must be floating, got ",
                    topk_weights.scalar_type());
  if (expert_range.has_value()) {
    const auto r = *expert_range;
    TORCH_CHECK_VALUE(r.size() == 2 && r[0] >= 0 && r[1] - r[0] == p.local_experts, "expert_range must be [start, end)",
                      " with end - start = E = ", p.local_experts, " (the experts held in w13/w2), got ", r);
    p.expert_begin = r[0];
  }
  return p;
}

}  // namespace lowbit::torch_ops
