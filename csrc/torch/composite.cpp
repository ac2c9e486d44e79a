#include "composite.h"

namespace lowbit::torch_ops {

at::Tensor apply_activation(const at::Tensor& v, Activation a) {
  switch (a) {
    case Activation::kSiLU:
      return at::silu(v);
    case Activation::kGELU:
      return at::gelu(v, "none");
    case Activation::kGELUTanh:
      return at::gelu(v, "tanh");
  }
  TORCH_CHECK_VALUE(false, "activation: unknown activation");
}

at::Tensor fused_moe_composite(const FusedMoePlan& p, const at::Tensor& x, const at::Tensor& topk_weights,
                               const at::Tensor& topk_ids, const DequantizeExpert& dequantize_expert) {
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor ids = topk_ids.to(at::kLong);
  const at::Tensor weights = topk_weights.to(at::kFloat);
  at::Tensor out = at::zeros({p.tokens, p.hidden}, x.options().dtype(at::kFloat));
  // Which local experts are used at all, in one host read (ids are data; shapes depend on them).
  const at::Tensor local = ids - p.expert_begin;
  const at::Tensor valid = (local >= 0) & (local < p.local_experts);
  const at::Tensor used = at::bincount(local.masked_select(valid), {}, p.local_experts).cpu();
  const int64_t* counts = used.data_ptr<int64_t>();
  for (int64_t e = 0; e < p.local_experts; ++e) {
    if (counts[e] == 0) continue;
    // Ids that are negative, past the last expert or another rank's match no local e.
    const at::Tensor pairs = (ids == p.expert_begin + e).nonzero();  // [P, 2] of (token, slot)
    const at::Tensor tokens = pairs.select(1, 0);
    const at::Tensor h = at::matmul(xf.index_select(0, tokens), dequantize_expert(p.w13, e, at::kFloat).t());
    const at::Tensor a =
        apply_activation(h.narrow(1, 0, p.intermediate), p.activation) * h.narrow(1, p.intermediate, p.intermediate);
    const at::Tensor y = at::matmul(a, dequantize_expert(p.w2, e, at::kFloat).t());
    const at::Tensor scale = weights.index({tokens, pairs.select(1, 1)}).unsqueeze(1);
    out.index_add_(0, tokens, y * scale);
  }
  return out.to(x.scalar_type());
}

}  // namespace lowbit::torch_ops
