// CPU implementations of the lowbit ops: the C++ core decodes, torch's CPU GEMM multiplies.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "lowbit/cpu.h"
#include "op_plans.h"

namespace lowbit::torch_ops {
namespace {

FloatType float_type(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return FloatType::F32;
    case at::kBFloat16:
      return FloatType::BF16;
    case at::kHalf:
      return FloatType::F16;
    default:
      TORCH_CHECK_VALUE(false, "dtype must be float32, bfloat16 or float16, got ", t);
  }
}

// Decodes `rows` consecutive rows of w starting at row `first` (rows of all experts in order).
void dequantize_rows(const WeightArg& w, int64_t first, int64_t rows, at::Tensor& out) {
  const FloatType type = float_type(out.scalar_type());
  const int64_t total = (w.experts > 0 ? w.experts : 1) * w.rows;
  const int64_t grain = std::max<int64_t>(1, (1 << 16) / w.k);
  uint8_t* dst = static_cast<uint8_t*>(out.data_ptr());
  const size_t elem = out.element_size();
  TORCH_INTERNAL_ASSERT(first + rows <= total);
  at::parallel_for(first, first + rows, grain, [&](int64_t begin, int64_t end) {
    WeightView v = w.view;
    v.data = static_cast<const uint8_t*>(w.view.data) + begin * w.view.row_stride;
    v.scales = w.view.scales ? w.view.scales + begin * w.view.scale_row_stride : nullptr;
    translate_errors([&] {
      cpu::dequantize(w.type, v, end - begin, w.k, dst + static_cast<size_t>((begin - first) * w.k) * elem, type,
                      w.k);
    });
  });
}

at::Tensor dequantize_cpu(const at::Tensor& w, int64_t qtype, int64_t k, const std::optional<at::Tensor>& scales,
                          std::optional<at::ScalarType> dtype) {
  const DequantizePlan p = plan_dequantize(w, qtype, k, scales, dtype);
  at::Tensor out = at::empty(p.out_shape, w.options().dtype(p.dtype));
  dequantize_rows(p.w, 0, (p.w.experts > 0 ? p.w.experts : 1) * p.w.rows, out);
  return out;
}

at::Tensor dequantize_expert_f32(const WeightArg& w, int64_t e, const at::TensorOptions& options) {
  at::Tensor out = at::empty({w.rows, w.k}, options.dtype(at::kFloat));
  dequantize_rows(w, e * w.rows, w.rows, out);
  return out;
}

at::Tensor linear_cpu(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const std::optional<at::Tensor>& scales,
                      const std::optional<at::Tensor>& bias) {
  const LinearPlan p = plan_linear(x, w, qtype, scales, bias);
  const at::Tensor weight = dequantize_expert_f32(p.w, 0, x.options());
  at::Tensor y = at::matmul(x.reshape({p.m, p.w.k}).to(at::kFloat), weight.t());
  if (bias.has_value()) y.add_(bias->to(at::kFloat));
  return y.to(x.scalar_type()).reshape(p.out_shape);
}

std::tuple<at::Tensor, at::Tensor> quantize_cpu(const at::Tensor& w, int64_t qtype, int64_t scale_rule) {
  const QuantizePlan p = plan_quantize(w, qtype, scale_rule);
  const at::Tensor x = w.to(at::kFloat).contiguous();
  at::Tensor data = at::empty(p.data_shape, w.options().dtype(at::kByte));
  at::Tensor scales = at::empty(p.scales_shape, w.options().dtype(at::kByte));
  translate_errors([&] {
    cpu::quantize(p.info->type, x.data_ptr<float>(), p.rows, p.k, p.rule, data.data_ptr<uint8_t>(),
                  p.info->split_scales ? scales.data_ptr<uint8_t>() : nullptr);
  });
  return {data, scales};
}

at::Tensor activate(const at::Tensor& v, Activation a) {
  switch (a) {
    case Activation::kSiLU:
      return at::silu(v);
    case Activation::kGELU:
      return at::gelu(v, "none");
    case Activation::kGELUTanh:
      return at::gelu(v, "tanh");
  }
  TORCH_CHECK_VALUE(false, "activation: unknown");
}

at::Tensor fused_moe_cpu(const at::Tensor& x, const at::Tensor& w13, const at::Tensor& w2,
                         const at::Tensor& topk_weights, const at::Tensor& topk_ids, int64_t w13_type, int64_t w2_type,
                         c10::string_view activation, const std::optional<at::Tensor>& w13_scales,
                         const std::optional<at::Tensor>& w2_scales, at::OptionalIntArrayRef expert_range) {
  const FusedMoePlan p = plan_fused_moe(x, w13, w2, topk_weights, topk_ids, w13_type, w2_type, activation, w13_scales,
                                        w2_scales, expert_range);
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor ids = topk_ids.to(at::kLong);
  const at::Tensor weights = topk_weights.to(at::kFloat);
  at::Tensor out = at::zeros({p.tokens, p.hidden}, x.options().dtype(at::kFloat));
  for (int64_t e = 0; e < p.local_experts; ++e) {
    // Ids that are negative, >= the global expert count or belong to another rank match no e.
    const at::Tensor pairs = (ids == p.expert_begin + e).nonzero();  // [P, 2] of (token, slot)
    if (pairs.size(0) == 0) continue;
    const at::Tensor tokens = pairs.select(1, 0);
    const at::Tensor h = at::matmul(xf.index_select(0, tokens), dequantize_expert_f32(p.w13, e, x.options()).t());
    const at::Tensor a = activate(h.narrow(1, 0, p.intermediate), p.activation) * h.narrow(1, p.intermediate, p.intermediate);
    const at::Tensor y = at::matmul(a, dequantize_expert_f32(p.w2, e, x.options()).t());
    const at::Tensor scale = weights.index({tokens, pairs.select(1, 1)}).unsqueeze(1);
    out.index_add_(0, tokens, y * scale);
  }
  return out.to(x.scalar_type());
}

}  // namespace

TORCH_LIBRARY_IMPL(lowbit, CPU, m) {
  m.impl("dequantize", &dequantize_cpu);
  m.impl("linear", &linear_cpu);
  m.impl("quantize", &quantize_cpu);
  m.impl("fused_moe", &fused_moe_cpu);
}

}  // namespace lowbit::torch_ops
