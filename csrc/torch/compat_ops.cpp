// GGUF op names that servers already call (sgl-kernel and vLLM's GGUF kernels share them), with
// their schemas and semantics, registered in lowbit's namespace and computed by lowbit's ops (so
// by lowbit's dispatcher): torch.ops.lowbit.ggml_dequantize, ggml_mul_mat_vec_a8, ggml_mul_mat_a8,
// ggml_supports_iq_mmq. A server switches its GGUF layer by calling these instead of
// torch.ops.sgl_kernel.* / torch.ops._C.* (README, "Switching a server's GGUF layer").
//
// Schemas as sgl-kernel (sgl-kernel/csrc/common_extension.cc) and vLLM (csrc/torch_bindings.cpp)
// define them; W is the GGUF tensor's bytes, uint8 [rows, row_bytes], `type` a raw ggml type id:
//   ggml_dequantize(Tensor W, int type, SymInt m, SymInt n, ScalarType? dtype) -> Tensor
//       the first m * n weights of W, in order, as [m, n] (dtype default float16)
//   ggml_mul_mat_vec_a8(Tensor W, Tensor X, int type, SymInt row) -> Tensor   decode, X [B, K]
//   ggml_mul_mat_a8(Tensor W, Tensor X, int type, SymInt row) -> Tensor       prefill, X [B, K]
//       both: Y = X W^T, [B, row] in X's dtype; row = W.shape[0]
//   ggml_supports_iq_mmq() -> bool   (ggml_mul_mat_a8 takes the I-quants: always true here)
// The MoE names, registered in compat_moe_ops.cpp on lowbit's GPU MoE routing, with the same
// conventions (names, argument order and meaning exactly as there):
//   ggml_moe_a8(Tensor X, Tensor W, Tensor sorted_token_ids, Tensor expert_ids,
//               Tensor num_tokens_post_padded, int type, SymInt row, SymInt top_k, SymInt tokens) -> Tensor
//       W [E, row, row_bytes]; sorted_token_ids / expert_ids / num_tokens_post_padded (int32) as
//       moe_align_block_size makes them with block size ggml_moe_get_block_size(type); a sorted id
//       t (< tokens * top_k) reads X row t / top_k (top_k = 1 for the second projection, whose X is
//       [tokens * top_k, I]); padding ids (>= tokens * top_k) are skipped; an expert id of -1
//       writes exact zeros. Out: [tokens * top_k, row] in X's dtype (float32 accumulation).
//   ggml_moe_a8_vec(Tensor X, Tensor W, Tensor topk_ids, int top_k, int type, SymInt row,
//                   SymInt tokens) -> Tensor
//       the vector path for few tokens: out [tokens * top_k, row]; pair p (topk_ids read flat,
//       int32) multiplies X row p / top_k by expert topk_ids[p]; the second projection passes
//       X [tokens * top_k, I], top_k = 1 and tokens * top_k as tokens; an id of -1 gives zeros.
//   ggml_moe_get_block_size(int type) -> int    the block size the server aligns routing to.
//   Python wrappers (sgl_kernel/quantization/gguf.py names): ggml_moe_a8(input, weight,
//   sorted_token_ids, expert_ids, num_token_post_padded, type, row, topk, tokens),
//   ggml_moe_a8_vec(input, weight, topk_ids, top_k, type, row, tokens), ggml_moe_get_block_size(type).
//
// Differences, on purpose: every lowbit GGUF weight type at any K that is whole blocks (no MMQ
// K-alignment rule), any batch size in both matmul ops, and CPU tensors too. An unsupported
// type raises RuntimeError with sgl-kernel's wording ("Unsupported GGUF ... type"), so a server's
// existing handling keeps working; other bad arguments raise ValueError naming the argument.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <optional>
#include <string>

#include "compat_types.h"
#include "lowbit/quant_type.h"

namespace lowbit::torch_ops {

const TypeInfo& ggml_weight_type(int64_t type, const char* what) {
  const TypeInfo* info = find_type(type);
  const bool ok = info != nullptr && info->is_weight && !info->split_scales;
  TORCH_CHECK(ok, "type: Unsupported GGUF ", what, " type ", type,
              info ? std::string(" (") + info->name + ")" : std::string(),
              "; lowbit computes on q5_0, q8_0, mxfp4 and the I-quants iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, "
              "iq3_xxs, iq3_s, iq4_nl, iq4_xs");
  return *info;
}

namespace {

// K of W's rows for `info`, after the checks every compat op shares.
int64_t checked_row_k(const at::Tensor& W, const TypeInfo& info) {
  TORCH_CHECK_VALUE(W.scalar_type() == at::kByte, "W must be uint8 (the GGUF tensor's bytes), got ", W.scalar_type());
  const int64_t row_bytes = W.dim() >= 1 ? W.size(-1) : 0;
  TORCH_CHECK_VALUE(row_bytes > 0 && row_bytes % info.block_bytes == 0, "W: a row of ", row_bytes,
                    " bytes is not a whole number of ", info.name, " blocks (", info.block_bytes, " bytes each)");
  return row_bytes / info.block_bytes * info.block_elems;
}

void check_matmul_args(const at::Tensor& W, const at::Tensor& X, const c10::SymInt& row, const TypeInfo& info) {
  TORCH_CHECK_VALUE(W.dim() == 2, "W must be 2-D [row, row_bytes], got shape ", W.sizes());
  const int64_t k = checked_row_k(W, info);
  TORCH_CHECK_VALUE(X.dim() == 2, "X must be 2-D [batch, K], got shape ", X.sym_sizes());
  TORCH_CHECK_VALUE(X.scalar_type() == at::kFloat || X.scalar_type() == at::kBFloat16 || X.scalar_type() == at::kHalf,
                    "X must be float32, bfloat16 or float16, got ", X.scalar_type());
  TORCH_CHECK_VALUE(X.sym_size(1) == k, "X must have K = ", k, " columns (from W's rows of ", info.name,
                    " blocks), got shape ", X.sym_sizes());
  TORCH_CHECK_VALUE(row == W.sym_size(0), "row: ", row, " must equal W.shape[0] = ", W.sym_size(0));
}

void check_dequantize_args(const at::Tensor& W, const c10::SymInt& m, const c10::SymInt& n, const TypeInfo& info) {
  TORCH_CHECK_VALUE(W.dim() == 2 || W.dim() == 3, "W must be 2-D [rows, row_bytes] (or 3-D [E, rows, row_bytes]), ",
                    "got shape ", W.sizes());
  const int64_t k = checked_row_k(W, info);
  TORCH_CHECK_VALUE(m >= 0 && n >= 0, "m, n: the output shape [", m, ", ", n, "] must not be negative");
  const c10::SymInt held = W.sym_numel() / W.sym_size(-1) * k;
  TORCH_CHECK_VALUE(m * n == held, "m, n: [", m, ", ", n, "] asks for ", m * n, " weights but W holds ", held, " ",
                    info.name, " weights");
}

at::ScalarType dequantize_dtype(std::optional<at::ScalarType> dtype) {
  const at::ScalarType t = dtype.value_or(at::kHalf);
  TORCH_CHECK_VALUE(t == at::kHalf || t == at::kBFloat16 || t == at::kFloat,
                    "dtype must be torch.float16, torch.bfloat16 or torch.float32, got ", t);
  return t;
}

at::Tensor call_lowbit_dequantize(const at::Tensor& W, int64_t type, at::ScalarType dtype) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("lowbit::dequantize", "")
                             .typed<at::Tensor(const at::Tensor&, int64_t, int64_t, const std::optional<at::Tensor>&,
                                               std::optional<at::ScalarType>)>();
  return op.call(W, type, -1, std::nullopt, dtype);
}

at::Tensor call_lowbit_linear(const at::Tensor& X, const at::Tensor& W, int64_t type) {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("lowbit::linear", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, const std::optional<at::Tensor>&,
                            const std::optional<at::Tensor>&, c10::string_view)>();
  return op.call(X, W, type, std::nullopt, std::nullopt, "auto");
}

// ---- CPU and CUDA: lowbit's ops on the tensors' device ------------------------------------------

at::Tensor ggml_dequantize(const at::Tensor& W, int64_t type, int64_t m, int64_t n,
                           std::optional<at::ScalarType> dtype) {
  const TypeInfo& info = ggml_weight_type(type, "dequantization");
  check_dequantize_args(W, m, n, info);
  const at::ScalarType out_dtype = dequantize_dtype(dtype);
  if (m * n == 0) return at::empty({m, n}, W.options().dtype(out_dtype));
  return call_lowbit_dequantize(W, type, out_dtype).reshape({m, n});
}

// Both matmul names run lowbit.linear: its dispatcher picks MMVQ or dequantize + GEMM by batch.
at::Tensor ggml_matmul(const at::Tensor& W, const at::Tensor& X, int64_t type, int64_t row, const char* what) {
  const TypeInfo& info = ggml_weight_type(type, what);
  check_matmul_args(W, X, row, info);
  return call_lowbit_linear(X, W, type);
}

at::Tensor ggml_mul_mat_vec_a8(const at::Tensor& W, const at::Tensor& X, int64_t type, int64_t row) {
  return ggml_matmul(W, X, type, row, "MMVQ quantization");
}

at::Tensor ggml_mul_mat_a8(const at::Tensor& W, const at::Tensor& X, int64_t type, int64_t row) {
  return ggml_matmul(W, X, type, row, "MMQ quantization");
}

bool ggml_supports_iq_mmq() {
  return true;  // ggml_mul_mat_a8 serves every I-quant at every batch size on every device
}

// ---- Meta: shapes only, symbolic sizes allowed (torch.compile) ----------------------------------

at::Tensor ggml_dequantize_meta(const at::Tensor& W, int64_t type, c10::SymInt m, c10::SymInt n,
                                std::optional<at::ScalarType> dtype) {
  check_dequantize_args(W, m, n, ggml_weight_type(type, "dequantization"));
  return at::empty_symint({m, n}, W.options().dtype(dequantize_dtype(dtype)));
}

at::Tensor ggml_matmul_meta(const at::Tensor& W, const at::Tensor& X, int64_t type, const c10::SymInt& row,
                            const char* what) {
  const TypeInfo& info = ggml_weight_type(type, what);
  check_matmul_args(W, X, row, info);
  return at::empty_symint({X.sym_size(0), row}, X.options());
}

at::Tensor ggml_mul_mat_vec_a8_meta(const at::Tensor& W, const at::Tensor& X, int64_t type, c10::SymInt row) {
  return ggml_matmul_meta(W, X, type, row, "MMVQ quantization");
}

at::Tensor ggml_mul_mat_a8_meta(const at::Tensor& W, const at::Tensor& X, int64_t type, c10::SymInt row) {
  return ggml_matmul_meta(W, X, type, row, "MMQ quantization");
}

}  // namespace
}  // namespace lowbit::torch_ops

TORCH_LIBRARY_FRAGMENT(lowbit, m) {
  m.def("ggml_dequantize(Tensor W, int type, SymInt m, SymInt n, ScalarType? dtype) -> Tensor");
  m.def("ggml_mul_mat_vec_a8(Tensor W, Tensor X, int type, SymInt row) -> Tensor");
  m.def("ggml_mul_mat_a8(Tensor W, Tensor X, int type, SymInt row) -> Tensor");
  m.def("ggml_supports_iq_mmq() -> bool", &lowbit::torch_ops::ggml_supports_iq_mmq);
}

// One implementation for CPU and CUDA: it calls lowbit's ops, which dispatch on the device.
TORCH_LIBRARY_IMPL(lowbit, CPU, m) {
  using namespace lowbit::torch_ops;
  m.impl("ggml_dequantize", &ggml_dequantize);
  m.impl("ggml_mul_mat_vec_a8", &ggml_mul_mat_vec_a8);
  m.impl("ggml_mul_mat_a8", &ggml_mul_mat_a8);
}

TORCH_LIBRARY_IMPL(lowbit, CUDA, m) {
  using namespace lowbit::torch_ops;
  m.impl("ggml_dequantize", &ggml_dequantize);
  m.impl("ggml_mul_mat_vec_a8", &ggml_mul_mat_vec_a8);
  m.impl("ggml_mul_mat_a8", &ggml_mul_mat_a8);
}

TORCH_LIBRARY_IMPL(lowbit, Meta, m) {
  using namespace lowbit::torch_ops;
  m.impl("ggml_dequantize", &ggml_dequantize_meta);
  m.impl("ggml_mul_mat_vec_a8", &ggml_mul_mat_vec_a8_meta);
  m.impl("ggml_mul_mat_a8", &ggml_mul_mat_a8_meta);
}
