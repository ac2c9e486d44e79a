// CPU implementations of the lowbit ops: the C++ core decodes, torch's CPU GEMM multiplies.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "composite.h"
#include "lowbit/cpu.h"
#include "op_plans.h"

namespace lowbit::torch_ops {
namespace {

// Decodes `rows` consecutive rows of w (rows of all experts in order) from row `first` into out.
void dequantize_rows(const WeightArg& w, int64_t first, int64_t rows, at::Tensor& out) {
  const FloatType type = float_type(out.scalar_type());
  const int64_t grain = std::max<int64_t>(1, (1 << 16) / w.k);
  uint8_t* dst = static_cast<uint8_t*>(out.data_ptr());
  const size_t elem = out.element_size();
  at::parallel_for(first, first + rows, grain, [&](int64_t begin, int64_t end) {
    WeightView v = w.view;
    v.data = static_cast<const uint8_t*>(w.view.data) + begin * w.view.row_stride;
    v.scales = w.view.scales ? w.view.scales + begin * w.view.scale_row_stride : nullptr;
    translate_errors([&] {
      cpu::dequantize(w.type, v, end - begin, w.k, dst + static_cast<size_t>((begin - first) * w.k) * elem, type, w.k);
    });
  });
}

at::Tensor dequantize_expert_cpu(const WeightArg& w, int64_t e, at::ScalarType dtype) {
  at::Tensor out = at::empty({w.rows, w.k}, at::TensorOptions().dtype(dtype));
  dequantize_rows(w, e * w.rows, w.rows, out);
  return out;
}

at::Tensor dequantize_cpu(const at::Tensor& w, int64_t qtype, int64_t k, const std::optional<at::Tensor>& scales,
                          std::optional<at::ScalarType> dtype) {
  const DequantizePlan p = plan_dequantize(w, qtype, k, scales, dtype);
  at::Tensor out = at::empty(p.out_shape, w.options().dtype(p.dtype));
  dequantize_rows(p.w, 0, p.w.total_rows, out);
  return out;
}

at::Tensor linear_reference(const LinearPlan& p, const at::Tensor& x, const std::optional<at::Tensor>& bias) {
  at::Tensor y = at::matmul(x.reshape({p.m, p.w.k}).to(at::kFloat), dequantize_expert_cpu(p.w, 0, at::kFloat).t());
  if (bias.has_value()) y.add_(bias->to(at::kFloat));
  return y.to(x.scalar_type()).reshape(p.out_shape);
}

at::Tensor linear_cpu(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const std::optional<at::Tensor>& scales,
                      const std::optional<at::Tensor>& bias, c10::string_view route) {
  const LinearPlan p = plan_linear(x, w, qtype, scales, bias);
  if (route != "auto") {
    // an unknown name is reported as such before a known CUDA kernel is refused
    const DenseKernel forced = translate_errors([&] { return parse_dense_kernel(std::string(route), "route"); });
    TORCH_CHECK_VALUE(forced == DenseKernel::kCpuReference, "route: \"", std::string(route),
                      "\" needs a CUDA device; on the CPU use \"auto\" or \"cpu_reference\"");
  }
  return linear_reference(p, x, bias);
}

// The CPU computes the exact reference whatever arithmetic `math` names for CUDA.
at::Tensor mmvq_cpu(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const std::optional<at::Tensor>& scales,
                    c10::string_view math) {
  const LinearPlan p = plan_mmvq(x, w, qtype, scales, math);
  return linear_reference(p, x, std::nullopt);
}

// The CPU computes the exact reference for MMQ too.
at::Tensor mmq_cpu(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const std::optional<at::Tensor>& scales,
                   c10::string_view math) {
  return linear_reference(plan_mmq(x, w, qtype, scales, math), x, std::nullopt);
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

at::Tensor fused_moe_cpu(const at::Tensor& x, const at::Tensor& w13, const at::Tensor& w2,
                         const at::Tensor& topk_weights, const at::Tensor& topk_ids, int64_t w13_type, int64_t w2_type,
                         c10::string_view activation, const std::optional<at::Tensor>& w13_scales,
                         const std::optional<at::Tensor>& w2_scales, at::OptionalIntArrayRef expert_range) {
  const FusedMoePlan p = plan_fused_moe(x, w13, w2, topk_weights, topk_ids, w13_type, w2_type, activation, w13_scales,
                                        w2_scales, expert_range);
  return fused_moe_composite(p, x, topk_weights, topk_ids, &dequantize_expert_cpu);
}

}  // namespace

TORCH_LIBRARY_IMPL(lowbit, CPU, m) {
  m.impl("dequantize", &dequantize_cpu);
  m.impl("linear", &linear_cpu);
  m.impl("mmvq", &mmvq_cpu);
  m.impl("mmq", &mmq_cpu);
  m.impl("quantize", &quantize_cpu);
  m.impl("fused_moe", &fused_moe_cpu);
}

}  // namespace lowbit::torch_ops
