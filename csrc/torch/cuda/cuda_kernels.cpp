// CUDA implementations of the lowbit ops over lowbit's C++ CUDA API: on the tensors' device, on
// torch's current stream, no host synchronization (CUDA-graph capturable; fused_moe past the MoE
// kernels' limits excepted, cuda/moe_ops.h).
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "cuda/aligned.h"
#include "cuda/moe_ops.h"
#include "lowbit/cuda.h"
#include "lowbit/dispatch.h"
#include "lowbit/plan.h"
#include "op_plans.h"

namespace lowbit::torch_ops {
namespace {

at::Tensor dequantize_cuda(const at::Tensor& w, int64_t qtype, int64_t k, const std::optional<at::Tensor>& scales,
                           std::optional<at::ScalarType> dtype) {
  const DequantizePlan p = plan_dequantize(w, qtype, k, scales, dtype);
  const c10::cuda::CUDAGuard guard(w.device());
  at::Tensor keep;
  const WeightArg a = aligned_weight(p.w, w, keep);
  at::Tensor out = at::empty(p.out_shape, w.options().dtype(p.dtype));
  const int64_t rows = p.w.total_rows;
  if (rows == 0) return out;  // nothing to decode (E = 0 or N = 0): no launch
  translate_errors([&] {
    cuda::dequantize(p.w.type, a.view, rows, p.w.k, out.data_ptr(), float_type(p.dtype), p.w.k,
                     c10::cuda::getCurrentCUDAStream());
  });
  return out;
}

// y [M, N] = x [M, K] W^T as `plan` (lowbit::plan_linear) says: MMVQ in passes of up to 16 tokens,
// MMQ, or the bf16 weight (decoded into the plan's workspace) times x through torch's GEMM.
at::Tensor run_plan(const Plan& plan, const WeightArg& w, const at::Tensor& x2) {
  at::Tensor x = x2.contiguous();
  if (plan.m == 0 || plan.n == 0) return at::empty({plan.m, plan.n}, x.options());  // nothing to compute
  if (!aligned16(x.data_ptr()) || x.stride(0) % 8 != 0) x = x.clone();
  const bool gemm = plan.kernel == DenseKernel::kDequantMatmul;  // torch's GEMM writes the output then
  // the output first (it takes the block the caching allocator offers first), then the workspace
  // from torch's caching allocator (stream-ordered, graph-safe), only where the plan reads one
  at::Tensor y = gemm ? at::Tensor() : at::empty({plan.m, plan.n}, x.options());
  const at::Tensor ws = plan.workspace_bytes > 0
                            ? at::empty({static_cast<int64_t>(plan.workspace_bytes)}, x.options().dtype(at::kByte))
                            : at::Tensor();
  void* const ws_ptr = plan.workspace_bytes > 0 ? ws.data_ptr() : nullptr;
  translate_errors([&] {
    cuda::execute(plan, w.view, x.data_ptr(), float_type(x.scalar_type()), x.stride(0), gemm ? nullptr : y.data_ptr(),
                  plan.n, ws_ptr, plan.workspace_bytes, c10::cuda::getCurrentCUDAStream());
  });
  if (gemm) y = at::matmul(x.to(at::kBFloat16), ws.view(at::kBFloat16).view({plan.n, plan.k}).t()).to(x.scalar_type());
  return y;
}

at::Tensor linear_cuda(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const std::optional<at::Tensor>& scales,
                       const std::optional<at::Tensor>& bias, c10::string_view route) {
  const LinearPlan p = plan_linear(x, w, qtype, scales, bias);
  const c10::cuda::CUDAGuard guard(w.device());
  at::Tensor keep;
  const WeightArg a = aligned_weight(p.w, w, keep);
  PlanOptions options;
  if (route != "auto") {
    options.kernel = translate_errors([&] { return parse_dense_kernel(std::string(route), "route"); });
    TORCH_CHECK_VALUE(options.kernel == DenseKernel::kMmvq || options.kernel == DenseKernel::kMmq ||
                          options.kernel == DenseKernel::kDequantMatmul,
                      "route: \"", std::string(route),
                      "\" is not built for CUDA (use auto, mmvq, mmq or dequant_matmul)");
  }
  const Plan plan =
      translate_errors([&] { return plan_linear(p.w.type, p.m, p.w.rows, p.w.k, device_facts(w.device()), options); });
  at::Tensor y = run_plan(plan, a, x.reshape({p.m, p.w.k}));
  if (bias.has_value()) y.add_(bias->to(y.scalar_type()));
  return y.reshape(p.out_shape);
}

at::Tensor mmvq_cuda(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const std::optional<at::Tensor>& scales,
                     c10::string_view math) {
  const LinearPlan p = plan_mmvq(x, w, qtype, scales, math);
  const c10::cuda::CUDAGuard guard(w.device());
  PlanOptions options;
  options.kernel = DenseKernel::kMmvq;
  options.math = p.math;
  const Plan plan =
      translate_errors([&] { return plan_linear(p.w.type, p.m, p.w.rows, p.w.k, device_facts(w.device()), options); });
  at::Tensor keep;
  return run_plan(plan, aligned_weight(p.w, w, keep), x);
}

at::Tensor mmq_cuda(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const std::optional<at::Tensor>& scales,
                    c10::string_view math) {
  const LinearPlan p = plan_mmq(x, w, qtype, scales, math);
  const c10::cuda::CUDAGuard guard(w.device());
  // MMQ's kernels are Hopper's (sm_90a); elsewhere the op computes the same product through the
  // plan's dequantize + bf16 GEMM, so that callers need no device test of their own
  const DeviceFacts facts = device_facts(w.device());
  PlanOptions options;
  options.kernel = facts.mmq ? DenseKernel::kMmq : DenseKernel::kDequantMatmul;
  options.math = p.math;  // MMQ's arithmetic; dequantize + bf16 GEMM has one
  const Plan plan = translate_errors([&] { return plan_linear(p.w.type, p.m, p.w.rows, p.w.k, facts, options); });
  at::Tensor keep;
  return run_plan(plan, aligned_weight(p.w, w, keep), x.reshape({p.m, p.w.k})).reshape(p.out_shape);
}

at::Tensor fused_moe_cuda(const at::Tensor& x, const at::Tensor& w13, const at::Tensor& w2,
                          const at::Tensor& topk_weights, const at::Tensor& topk_ids, int64_t w13_type, int64_t w2_type,
                          c10::string_view activation, const std::optional<at::Tensor>& w13_scales,
                          const std::optional<at::Tensor>& w2_scales, at::OptionalIntArrayRef expert_range) {
  return fused_moe_cuda_run(x, w13, w2, topk_weights, topk_ids, w13_type, w2_type, activation, w13_scales, w2_scales,
                            expert_range, std::nullopt);
}

}  // namespace

TORCH_LIBRARY_IMPL(lowbit, CUDA, m) {
  m.impl("dequantize", &dequantize_cuda);
  m.impl("linear", &linear_cuda);
  m.impl("mmvq", &mmvq_cuda);
  m.impl("mmq", &mmq_cuda);
  m.impl("fused_moe", &fused_moe_cuda);
}

}  // namespace lowbit::torch_ops
