// The GGUF MoE ops servers already call, with sgl-kernel's (and vLLM's) schemas, as
// torch.ops.lowbit.ggml_moe_a8 / ggml_moe_a8_vec / ggml_moe_get_block_size, over lowbit's own
// moe_batched and moe_vec (composite: they work on every device those ops serve, fakes included).
//   ggml_moe_a8: routing from moe_align_block_size with ggml_moe_get_block_size's block; output
//     [tokens * top_k, row], row s of pair s = W[expert] X[s / top_k].
//   ggml_moe_a8_vec: the same from topk_ids directly.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "compat_types.h"
#include "lowbit/moe_policy.h"
#include "lowbit/quant_type.h"
#include "tensor_args.h"

TORCH_LIBRARY_FRAGMENT(lowbit, m) {
  m.def(
      "ggml_moe_a8(Tensor X, Tensor W, Tensor sorted_token_ids, Tensor expert_ids, Tensor num_tokens_post_padded, "
      "int type, SymInt row, SymInt top_k, SymInt tokens) -> Tensor");
  m.def(
      "ggml_moe_a8_vec(Tensor X, Tensor W, Tensor topk_ids, int top_k, int type, SymInt row, SymInt tokens) -> Tensor");
  m.def("ggml_moe_get_block_size(int type) -> int", [](int64_t type) -> int64_t {
    lowbit::torch_ops::ggml_weight_type(type, "MoE");
    return lowbit::kMoeBlockSize;
  });
}

namespace lowbit::torch_ops {
namespace {

void check_compat(const at::Tensor& W, const c10::SymInt& row, int64_t type) {
  ggml_weight_type(type, "MoE");
  TORCH_CHECK_VALUE(W.dim() == 3, "W must be 3-D [E, row, row_bytes], got shape ", W.sizes());
  TORCH_CHECK_VALUE(row == W.sym_size(1), "row: ", row, " must equal W.shape[1] = ", W.sym_size(1));
}

at::Tensor ggml_moe_a8(const at::Tensor& X, const at::Tensor& W, const at::Tensor& sorted_token_ids,
                       const at::Tensor& expert_ids, const at::Tensor& num_tokens_post_padded, int64_t type,
                       c10::SymInt row, c10::SymInt top_k, c10::SymInt tokens) {
  check_compat(W, row, type);
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("lowbit::moe_batched", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, const at::Tensor&, const at::Tensor&,
                            const at::Tensor&, int64_t, c10::SymInt, const std::optional<at::Tensor>&, int64_t,
                            c10::string_view, const std::optional<at::Tensor>&)>();
  const int64_t k = top_k.guard_int(__FILE__, __LINE__);
  // (the callers' routing has no pair slots: the output is zeroed first)
  return op.call(X, W, type, sorted_token_ids, expert_ids, num_tokens_post_padded, k, tokens * top_k, std::nullopt,
                 int64_t{kMoeBlockSize}, "auto", std::nullopt);
}

at::Tensor ggml_moe_a8_vec(const at::Tensor& X, const at::Tensor& W, const at::Tensor& topk_ids, int64_t top_k,
                           int64_t type, c10::SymInt row, c10::SymInt tokens) {
  check_compat(W, row, type);
  TORCH_CHECK_VALUE(tokens * top_k == topk_ids.sym_numel(), "tokens * top_k = ", tokens * top_k,
                    " must equal the number of expert ids, ", topk_ids.sym_numel());
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("lowbit::moe_vec", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, const at::Tensor&,
                                               int64_t, const std::optional<at::Tensor>&, at::OptionalIntArrayRef)>();
  return op.call(X, W, type, topk_ids, top_k, std::nullopt, std::nullopt);
}

}  // namespace

TORCH_LIBRARY_IMPL(lowbit, CompositeImplicitAutograd, m) {
  m.impl("ggml_moe_a8", &ggml_moe_a8);
  m.impl("ggml_moe_a8_vec", &ggml_moe_a8_vec);
}

}  // namespace lowbit::torch_ops
