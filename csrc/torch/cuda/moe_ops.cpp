#include "cuda/moe_ops.h"

#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "composite.h"
#include "cuda/aligned.h"
#include "lowbit/cuda.h"
#include "lowbit/cuda_moe.h"
#include "moe_op_plans.h"
#include "op_plans.h"

namespace lowbit::torch_ops {
namespace {

// x as the projection kernels read it: bf16, contiguous, 16-byte aligned.
at::Tensor bf16_rows(const at::Tensor& x) {
  at::Tensor xb = x.to(at::kBFloat16).contiguous();
  if (!aligned16(xb.data_ptr()) || xb.size(1) % 8 != 0) {
    const int64_t stride = (xb.size(1) + 7) / 8 * 8;
    at::Tensor padded = at::zeros({xb.size(0), stride}, xb.options());
    padded.narrow(1, 0, xb.size(1)).copy_(xb);
    xb = padded;
  }
  return xb;
}

cuda::MoeProjection projection(const WeightArg& w, const at::Tensor& xb, int64_t top_k, int64_t pairs, at::Tensor& y) {
  cuda::MoeProjection p;
  p.type = w.type;
  p.w = w.view;
  p.experts = w.experts;
  p.n = w.rows;
  p.k = w.k;
  p.x = xb.data_ptr();
  p.x_row_stride = xb.stride(0);
  p.x_pair_divisor = top_k;
  p.pairs = pairs;
  p.y = y.data_ptr();
  p.y_row_stride = w.rows;
  p.y_type = float_type(y.scalar_type());
  return p;
}

cuda::ExpertIds expert_ids(const at::Tensor& ids) {
  return {ids.data_ptr(), ids.scalar_type() == at::kLong};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> moe_align_cuda(const at::Tensor& topk_ids,
                                                                          int64_t num_experts, int64_t block_size,
                                                                          at::OptionalIntArrayRef expert_range) {
  const MoeAlignPlan p = plan_moe_align(topk_ids, num_experts, block_size, expert_range);
  const c10::cuda::CUDAGuard guard(topk_ids.device());
  const at::Tensor ids = topk_ids.contiguous();
  const auto i32 = topk_ids.options().dtype(at::kInt);
  at::Tensor sorted = at::empty({p.capacity}, i32), blocks = at::empty({p.blocks}, i32);
  at::Tensor used = at::empty({1}, i32), slots = at::empty({p.pairs}, i32);
  const size_t ws_bytes = cuda::moe_align_workspace_bytes(p.pairs, p.experts);
  at::Tensor ws = at::empty({static_cast<int64_t>(std::max<size_t>(ws_bytes, 16))}, ids.options().dtype(at::kByte));
  cuda::MoeRouting r{sorted.data_ptr<int32_t>(), p.capacity,
                     blocks.data_ptr<int32_t>(), p.blocks,
                     used.data_ptr<int32_t>(),   slots.data_ptr<int32_t>()};
  translate_errors([&] {
    cuda::moe_align(expert_ids(ids), p.pairs, p.experts, p.begin, static_cast<int>(p.block_size), r, ws.data_ptr(),
                    static_cast<size_t>(ws.numel()), c10::cuda::getCurrentCUDAStream());
  });
  return {sorted, blocks, used, slots};
}

at::Tensor moe_vec_cuda(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const at::Tensor& topk_ids,
                        int64_t top_k, const std::optional<at::Tensor>& scales, at::OptionalIntArrayRef expert_range) {
  const MoeProjPlan p = plan_moe_vec(x, w, qtype, topk_ids, top_k, scales, expert_range);
  const c10::cuda::CUDAGuard guard(w.device());
  at::Tensor keep;
  const WeightArg wa = aligned_weight(p.w, w, keep);
  at::Tensor y = at::empty({p.pairs, p.w.rows}, x.options());  // written in x's dtype by the kernel
  if (p.pairs == 0) return y;
  const at::Tensor xb = bf16_rows(x), ids = topk_ids.contiguous();
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const cuda::MoeProjection proj = projection(wa, xb, top_k, p.pairs, y);
  // the int8 activations: sized on the host, from the caching allocator (graph-capturable)
  const auto ws_bytes = static_cast<int64_t>(translate_errors([&] { return cuda::moe_vec_workspace_bytes(proj); }));
  at::Tensor ws = at::empty({ws_bytes}, ids.options().dtype(at::kByte));
  translate_errors([&] {
    cuda::moe_vec(proj, expert_ids(ids), p.begin, ws_bytes > 0 ? ws.data_ptr() : nullptr, static_cast<size_t>(ws_bytes),
                  stream);
  });
  return y;
}

at::Tensor moe_batched_cuda(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const at::Tensor& sorted_pair_ids,
                            const at::Tensor& block_experts, const at::Tensor& num_padded, int64_t top_k, int64_t pairs,
                            const std::optional<at::Tensor>& scales, int64_t block_size, c10::string_view math,
                            const std::optional<at::Tensor>& pair_slots) {
  const MoeProjPlan p = plan_moe_batched(x, w, qtype, sorted_pair_ids, block_experts, num_padded, top_k, pairs, scales,
                                         block_size, math, pair_slots);
  const c10::cuda::CUDAGuard guard(w.device());
  at::Tensor keep;
  const WeightArg wa = aligned_weight(p.w, w, keep);
  // written in x's dtype by the kernels; the rows of pairs without a local expert are zeros, written
  // where the routing's pair slots name them, else left from zeroing the whole output
  const at::Tensor slots = pair_slots.has_value() ? pair_slots->contiguous() : at::Tensor();
  at::Tensor y =
      slots.defined() ? at::empty({pairs, p.w.rows}, x.options()) : at::zeros({pairs, p.w.rows}, x.options());
  if (pairs == 0) return y;
  const at::Tensor xb = bf16_rows(x);
  const at::Tensor sorted = sorted_pair_ids.contiguous(), blocks = block_experts.contiguous();
  const at::Tensor used = num_padded.contiguous();
  cuda::MoeRouting r{const_cast<int32_t*>(sorted.data_ptr<int32_t>()),
                     sorted.numel(),
                     const_cast<int32_t*>(blocks.data_ptr<int32_t>()),
                     blocks.numel(),
                     const_cast<int32_t*>(used.data_ptr<int32_t>()),
                     slots.defined() ? const_cast<int32_t*>(slots.data_ptr<int32_t>()) : nullptr,
                     static_cast<int>(p.block_size),
                     /*zero_dropped=*/slots.defined()};
  cuda::MoeProjection proj = projection(wa, xb, top_k, pairs, y);
  proj.math = p.math;
  // sized from shapes alone (graph capture); the caching allocator's blocks are 512-byte aligned
  const auto ws_bytes =
      static_cast<int64_t>(translate_errors([&] { return cuda::moe_batched_workspace_bytes(proj, r.block_size); }));
  at::Tensor ws = at::empty({std::max<int64_t>(ws_bytes, 1)}, x.options().dtype(at::kByte));
  translate_errors([&] {
    cuda::moe_batched(proj, r, c10::cuda::getCurrentCUDAStream(), ws.data_ptr(), static_cast<size_t>(ws.numel()));
  });
  return y;
}

at::Tensor dequantize_expert(const WeightArg& w, int64_t e, at::ScalarType dtype) {
  at::Tensor out =
      at::empty({w.rows, w.k}, at::TensorOptions().dtype(dtype).device(at::kCUDA, c10::cuda::current_device()));
  WeightView v = w.view;
  v.data = static_cast<const uint8_t*>(w.view.data) + e * w.view.expert_stride;
  v.scales = w.view.scales ? w.view.scales + e * w.view.scale_expert_stride : nullptr;
  translate_errors([&] {
    cuda::dequantize(w.type, v, w.rows, w.k, out.data_ptr(), float_type(dtype), w.k, c10::cuda::getCurrentCUDAStream());
  });
  return out;
}

at::Tensor moe_layer_cuda(const at::Tensor& x, const at::Tensor& w13, const at::Tensor& w2,
                          const at::Tensor& topk_weights, const at::Tensor& topk_ids, int64_t w13_type, int64_t w2_type,
                          c10::string_view activation, const std::optional<at::Tensor>& w13_scales,
                          const std::optional<at::Tensor>& w2_scales, at::OptionalIntArrayRef expert_range,
                          c10::string_view kernel) {
  const std::optional<MoeKernel> force = parse_moe_layer_kernel(kernel);
  return fused_moe_cuda_run(x, w13, w2, topk_weights, topk_ids, w13_type, w2_type, activation, w13_scales, w2_scales,
                            expert_range, force);
}

}  // namespace

at::Tensor fused_moe_cuda_run(const at::Tensor& x, const at::Tensor& w13, const at::Tensor& w2,
                              const at::Tensor& topk_weights, const at::Tensor& topk_ids, int64_t w13_type,
                              int64_t w2_type, c10::string_view activation, const std::optional<at::Tensor>& w13_scales,
                              const std::optional<at::Tensor>& w2_scales, at::OptionalIntArrayRef expert_range,
                              std::optional<MoeKernel> force) {
  const FusedMoePlan p = plan_fused_moe(x, w13, w2, topk_weights, topk_ids, w13_type, w2_type, activation, w13_scales,
                                        w2_scales, expert_range);
  const c10::cuda::CUDAGuard guard(x.device());
  if (p.tokens == 0 || p.top_k == 0 || p.local_experts == 0) return at::zeros({p.tokens, p.hidden}, x.options());
  at::Tensor keep13, keep2;
  FusedMoePlan a = p;
  a.w13 = aligned_weight(p.w13, w13, keep13);
  a.w2 = aligned_weight(p.w2, w2, keep2);
  if (p.local_experts > kMoeMaxExperts || p.top_k > kMoeMaxTopK) {
    TORCH_CHECK_VALUE(!force.has_value(), "route: ", moe_kernel_name(*force), " takes E <= ", kMoeMaxExperts,
                      " and top_k <= ", kMoeMaxTopK, "; got E = ", p.local_experts, ", top_k = ", p.top_k);
    return fused_moe_composite(a, x, topk_weights, topk_ids, &dequantize_expert);
  }
  at::Tensor xc = x;
  if (xc.stride(1) != 1 || xc.stride(0) < p.hidden) xc = x.contiguous();
  const bool x_bf16 = xc.scalar_type() == at::kBFloat16 && aligned16(xc.data_ptr()) && xc.stride(0) % 8 == 0;
  const MoeShape shape{a.w13.type, a.w2.type, p.tokens, p.local_experts, p.top_k, p.hidden, p.intermediate};
  const DeviceFacts facts = device_facts(x.device());
  const MoePlan plan = translate_errors([&] { return plan_moe(shape, x_bf16, facts, force ? &*force : nullptr); });
  at::Tensor out = at::empty({p.tokens, p.hidden}, x.options());
  at::Tensor ws = at::empty({static_cast<int64_t>(plan.workspace.total)}, x.options().dtype(at::kByte));
  const at::Tensor weights = topk_weights.to(at::kFloat).contiguous(), ids = topk_ids.contiguous();
  cpu::MoeLayer layer{a.w13.type, a.w13.view,     a.w2.type,    a.w2.view,     p.local_experts,
                      p.hidden,   p.intermediate, p.activation, p.expert_begin};
  translate_errors([&] {
    cuda::fused_moe(layer, xc.data_ptr(), float_type(xc.scalar_type()), p.tokens, xc.stride(0),
                    weights.data_ptr<float>(), expert_ids(ids), p.top_k, out.data_ptr(), plan, ws.data_ptr(),
                    plan.workspace.total, c10::cuda::getCurrentCUDAStream());
  });
  return out;
}

TORCH_LIBRARY_IMPL(lowbit, CUDA, m) {
  m.impl("moe_align", &moe_align_cuda);
  m.impl("moe_vec", &moe_vec_cuda);
  m.impl("moe_batched", &moe_batched_cuda);
  m.impl("moe_layer", &moe_layer_cuda);
}

}  // namespace lowbit::torch_ops
