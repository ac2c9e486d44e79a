// Meta (shape-only) implementations for torch.compile and fake tensors: the same checks as the
// real kernels, no data.
#include <torch/library.h>

#include "op_plans.h"

namespace lowbit::torch_ops {
namespace {

at::Tensor dequantize_meta(const at::Tensor& w, int64_t qtype, int64_t k, const std::optional<at::Tensor>& scales,
                           std::optional<at::ScalarType> dtype) {
  const DequantizePlan p = plan_dequantize(w, qtype, k, scales, dtype);
  return at::empty(p.out_shape, w.options().dtype(p.dtype));
}

at::Tensor linear_meta(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const std::optional<at::Tensor>& scales,
                       const std::optional<at::Tensor>& bias) {
  const LinearPlan p = plan_linear(x, w, qtype, scales, bias);
  return at::empty(p.out_shape, x.options());
}

std::tuple<at::Tensor, at::Tensor> quantize_meta(const at::Tensor& w, int64_t qtype, int64_t scale_rule) {
  const QuantizePlan p = plan_quantize(w, qtype, scale_rule);
  return {at::empty(p.data_shape, w.options().dtype(at::kByte)), at::empty(p.scales_shape, w.options().dtype(at::kByte))};
}

at::Tensor fused_moe_meta(const at::Tensor& x, const at::Tensor& w13, const at::Tensor& w2,
                          const at::Tensor& topk_weights, const at::Tensor& topk_ids, int64_t w13_type,
                          int64_t w2_type, c10::string_view activation, const std::optional<at::Tensor>& w13_scales,
                          const std::optional<at::Tensor>& w2_scales, at::OptionalIntArrayRef expert_range) {
  const FusedMoePlan p = plan_fused_moe(x, w13, w2, topk_weights, topk_ids, w13_type, w2_type, activation, w13_scales,
                                        w2_scales, expert_range);
  return at::empty({p.tokens, p.hidden}, x.options());
}

}  // namespace

TORCH_LIBRARY_IMPL(lowbit, Meta, m) {
  m.impl("dequantize", &dequantize_meta);
  m.impl("linear", &linear_meta);
  m.impl("quantize", &quantize_meta);
  m.impl("fused_moe", &fused_moe_meta);
}

}  // namespace lowbit::torch_ops
