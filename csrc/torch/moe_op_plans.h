// Argument checks and output shapes of the MoE ops (moe_align, moe_vec, moe_batched, moe_layer),
// shared by their CPU and CUDA kernels so that every backend accepts exactly the same calls.
#pragma once

#include <ATen/ATen.h>

#include <optional>

#include "lowbit/moe_policy.h"
#include "op_plans.h"
#include "tensor_args.h"

namespace lowbit::torch_ops {

struct MoeAlignPlan {
  int64_t pairs = 0, experts = 0, begin = 0, block_size = 0, capacity = 0, blocks = 0;
};
MoeAlignPlan plan_moe_align(const at::Tensor& topk_ids, int64_t num_experts, int64_t block_size,
                            at::OptionalIntArrayRef expert_range);

// One projection over routed pairs: w [E, N, row_bytes(K)], x [rows, K] with
// rows >= ceil(pairs / top_k), output [pairs, N] in x's dtype.
struct MoeProjPlan {
  WeightArg w;
  int64_t pairs = 0, top_k = 0, begin = 0;
  int64_t block_size = 0;           // moe_batched: the routing's
  MmvqMath math = MmvqMath::kAuto;  // moe_batched: its arithmetic (MoeProjection::math)
};
MoeProjPlan plan_moe_vec(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const at::Tensor& topk_ids,
                         int64_t top_k, const std::optional<at::Tensor>& scales, at::OptionalIntArrayRef expert_range);
MoeProjPlan plan_moe_batched(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const at::Tensor& sorted_pair_ids,
                             const at::Tensor& block_experts, const at::Tensor& num_padded, int64_t top_k,
                             int64_t pairs, const std::optional<at::Tensor>& scales, int64_t block_size,
                             c10::string_view math, const std::optional<at::Tensor>& pair_slots);

// moe_layer's kernel argument: nullopt for "auto".
std::optional<MoeKernel> parse_moe_layer_kernel(c10::string_view kernel);

}  // namespace lowbit::torch_ops
