// CUDA implementations of the MoE ops over lowbit's CUDA MoE API (lowbit/cuda_moe.h): on the
// tensors' device and torch's current stream, workspace from torch's caching allocator, no host
// synchronization (CUDA-graph capturable).
#pragma once

#include <ATen/ATen.h>

#include <optional>

#include "lowbit/moe_policy.h"

namespace lowbit::torch_ops {

// lowbit::fused_moe on CUDA: plan_moe's kernel (or `force`), then cuda::fused_moe. Shapes beyond
// the kernels' limits (E > kMoeMaxExperts, top_k > kMoeMaxTopK) take the ATen composite, which
// reads which experts are used on the host.
at::Tensor fused_moe_cuda_run(const at::Tensor& x, const at::Tensor& w13, const at::Tensor& w2,
                              const at::Tensor& topk_weights, const at::Tensor& topk_ids, int64_t w13_type,
                              int64_t w2_type, c10::string_view activation, const std::optional<at::Tensor>& w13_scales,
                              const std::optional<at::Tensor>& w2_scales, at::OptionalIntArrayRef expert_range,
                              std::optional<MoeKernel> force);

}  // namespace lowbit::torch_ops
