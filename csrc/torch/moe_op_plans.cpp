#include "moe_op_plans.h"

#include <c10/util/Exception.h>

#include <string>

#include "lowbit/mmq_policy.h"

namespace lowbit::torch_ops {
namespace {

int64_t expert_begin(at::OptionalIntArrayRef expert_range, int64_t experts) {
  if (!expert_range.has_value()) return 0;
  const auto r = *expert_range;
  TORCH_CHECK_VALUE(r.size() == 2 && r[0] >= 0 && r[1] - r[0] == experts, "expert_range must be [start, end) with ",
                    "end - start = E = ", experts, " (the experts held locally), got ", r);
  return r[0];
}

void check_ids(const at::Tensor& ids, const char* name) {
  TORCH_CHECK_VALUE(ids.scalar_type() == at::kInt || ids.scalar_type() == at::kLong, name,
                    " must be int32 or int64, got ", ids.scalar_type());
}

void check_int32_vector(const at::Tensor& t, const char* name, const at::Tensor& w) {
  check_same_device(t, name, w, "w");
  TORCH_CHECK_VALUE(t.scalar_type() == at::kInt && t.dim() == 1, name, " must be a 1-D int32 tensor, got ",
                    t.scalar_type(), " of shape ", t.sizes());
}

void check_x(const at::Tensor& x, const WeightArg& w, const at::Tensor& wt, int64_t pairs, int64_t top_k) {
  check_activation(x, "x", wt, "w");
  TORCH_CHECK_VALUE(x.dim() == 2 && x.size(1) == w.k, "x must be 2-D [rows, K] with K = ", w.k,
                    " (from w's rows), got shape ", x.sizes());
  TORCH_CHECK_VALUE(top_k >= 1, "top_k must be >= 1, got ", top_k);
  const int64_t rows = (pairs + top_k - 1) / top_k;
  TORCH_CHECK_VALUE(x.size(0) >= rows, "x has ", x.size(0), " rows but ", pairs, " pairs with top_k = ", top_k,
                    " read rows up to ", rows - 1, " (pair p reads row p / top_k)");
}

WeightArg expert_weight(const at::Tensor& w, int64_t qtype, const std::optional<at::Tensor>& scales) {
  TORCH_CHECK_VALUE(w.dim() == 3, "w must be 3-D [E, N, row_bytes], got shape ", w.sizes());
  WeightArg a = weight_arg(w, qtype, -1, scales, "w", "scales", /*allow_3d=*/true);
  TORCH_CHECK_VALUE(a.experts >= 1 && a.experts <= kMoeMaxExperts, "w: E = ", a.experts, " experts must be in [1, ",
                    kMoeMaxExperts, "]");
  TORCH_CHECK_VALUE(a.rows >= 1, "w: N must be >= 1, got ", a.rows);
  return a;
}

}  // namespace

MoeAlignPlan plan_moe_align(const at::Tensor& topk_ids, int64_t num_experts, int64_t block_size,
                            at::OptionalIntArrayRef expert_range) {
  check_ids(topk_ids, "topk_ids");
  TORCH_CHECK_VALUE(num_experts >= 1 && num_experts <= kMoeMaxExperts, "num_experts must be in [1, ", kMoeMaxExperts,
                    "], got ", num_experts);
  TORCH_CHECK_VALUE(block_size >= 1 && block_size <= 1024, "block_size must be in [1, 1024], got ", block_size);
  MoeAlignPlan p;
  p.pairs = topk_ids.numel();
  p.experts = num_experts;
  p.block_size = block_size;
  p.begin = expert_begin(expert_range, num_experts);
  TORCH_CHECK_VALUE(p.pairs < (int64_t{1} << 31) - num_experts * block_size, "topk_ids: ", p.pairs,
                    " pairs do not fit int32 sorted rows");
  p.capacity = moe_sorted_capacity(p.pairs, p.experts, static_cast<int>(block_size));
  p.blocks = (p.capacity + block_size - 1) / block_size;
  return p;
}

MoeProjPlan plan_moe_vec(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const at::Tensor& topk_ids,
                         int64_t top_k, const std::optional<at::Tensor>& scales, at::OptionalIntArrayRef expert_range) {
  MoeProjPlan p{expert_weight(w, qtype, scales)};
  check_ids(topk_ids, "topk_ids");
  check_same_device(topk_ids, "topk_ids", w, "w");
  p.pairs = topk_ids.numel();
  p.top_k = top_k;
  check_x(x, p.w, w, p.pairs, top_k);
  p.begin = expert_begin(expert_range, p.w.experts);
  return p;
}

MoeProjPlan plan_moe_batched(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const at::Tensor& sorted_pair_ids,
                             const at::Tensor& block_experts, const at::Tensor& num_padded, int64_t top_k,
                             int64_t pairs, const std::optional<at::Tensor>& scales, int64_t block_size,
                             c10::string_view math, const std::optional<at::Tensor>& pair_slots) {
  MoeProjPlan p{expert_weight(w, qtype, scales)};
  p.math = translate_errors([&] { return parse_mmvq_math(std::string(math), "math"); });
  translate_errors([&] { check_mmq_math(p.w.type, p.math, "moe_batched"); });
  TORCH_CHECK_VALUE(block_size >= 1 && block_size <= 1024, "block_size must be in [1, 1024], got ", block_size);
  TORCH_CHECK_VALUE(pairs >= 0, "pairs must be >= 0, got ", pairs);
  p.pairs = pairs;
  p.top_k = top_k;
  check_x(x, p.w, w, pairs, top_k);
  check_int32_vector(sorted_pair_ids, "sorted_pair_ids", w);
  check_int32_vector(block_experts, "block_experts", w);
  check_int32_vector(num_padded, "num_padded", w);
  TORCH_CHECK_VALUE(num_padded.numel() >= 1, "num_padded must hold one element");
  const int bs = static_cast<int>(block_size);
  const int64_t need = moe_sorted_capacity(pairs, p.w.experts, bs);
  TORCH_CHECK_VALUE(sorted_pair_ids.numel() >= need, "sorted_pair_ids has ", sorted_pair_ids.numel(),
                    " rows; routing for ", pairs, " pairs over E = ", p.w.experts, " experts in blocks of ", bs,
                    " needs pairs + E * (block - 1) = ", need, " (moe_align with block_size ", bs, ")");
  TORCH_CHECK_VALUE(block_experts.numel() * block_size >= sorted_pair_ids.numel(), "block_experts has ",
                    block_experts.numel(), " blocks, too few for ", sorted_pair_ids.numel(),
                    " sorted rows in blocks of ", bs);
  if (pair_slots.has_value()) {
    // the slots name the dropped rows, and every other row must be one a kernel writes: a routing
    // made for w's E experts and this block size (one made for more experts would route pairs to
    // experts w lacks, whose blocks write nothing, over an output no longer zeroed first)
    check_int32_vector(*pair_slots, "pair_slots", w);
    TORCH_CHECK_VALUE(pair_slots->numel() == pairs, "pair_slots has ", pair_slots->numel(),
                      " elements; it must hold one slot per pair (", pairs, "), as moe_align returns it");
    TORCH_CHECK_VALUE(
        sorted_pair_ids.numel() == need, "pair_slots: the routing must be moe_align's for w's E = ", p.w.experts,
        " experts and block_size ", bs, " (", need, " sorted rows); sorted_pair_ids has ", sorted_pair_ids.numel());
  }
  p.block_size = block_size;
  return p;
}

std::optional<MoeKernel> parse_moe_layer_kernel(c10::string_view kernel) {
  if (kernel == "auto") return std::nullopt;
  return translate_errors([&] { return parse_moe_kernel(std::string(kernel), "route"); });
}

}  // namespace lowbit::torch_ops
