// Torch ops over lowbit/mx_layout.h: E8M0 scale pairing for Ascend and GGUF <-> split MXFP4.
// All four ops work on any number of leading batch dims ([N, ...] or [E, N, ...]); they are load-time
// conversions, so CPU (and Meta, for shapes) is what they need. Errors name the argument and the rule.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

#include "lowbit/error.h"
#include "lowbit/mx_layout.h"
#include "tensor_args.h"

namespace lowbit::torch_ops {
namespace {

constexpr int64_t kMxBlockElems = 32;
constexpr int64_t kGgufMxfp4BlockBytes = 17;

bool is_e8m0_bytes(const at::Tensor& t) {
  return t.scalar_type() == at::kByte || t.scalar_type() == at::kFloat8_e8m0fnu;
}

bool is_fp4_bytes(const at::Tensor& t) {
  return t.scalar_type() == at::kByte || t.scalar_type() == at::kChar || t.scalar_type() == at::kFloat4_e2m1fn_x2;
}

void check_e8m0(const at::Tensor& t, const char* name) {
  TORCH_CHECK_VALUE(is_e8m0_bytes(t), name, " must hold E8M0 codes as uint8 or float8_e8m0fnu, got ", t.scalar_type());
}

void check_rank(const at::Tensor& t, int64_t min_rank, const char* name, const char* layout) {
  TORCH_CHECK_VALUE(t.dim() >= min_rank, name, " must be ", layout, " (leading batch dims allowed), got shape ",
                    t.sizes());
}

// Rows of a tensor whose trailing `row_dims` dims form one row (product of the leading dims).
int64_t leading_rows(const at::Tensor& t, int64_t row_dims) {
  int64_t rows = 1;
  for (int64_t d = 0; d < t.dim() - row_dims; ++d) rows *= t.size(d);
  return rows;
}

std::vector<int64_t> with_trailing(const at::Tensor& t, int64_t drop, std::initializer_list<int64_t> trailing) {
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end() - drop);
  shape.insert(shape.end(), trailing);
  return shape;
}

const uint8_t* bytes_of(const at::Tensor& t) {
  return static_cast<const uint8_t*>(t.data_ptr());
}
uint8_t* bytes_of(at::Tensor& t) {
  return static_cast<uint8_t*>(t.data_ptr());
}

// ---- shapes (shared by the CPU and Meta kernels) -------------------------------------------------

std::vector<int64_t> paired_shape(const at::Tensor& scales) {
  check_rank(scales, 1, "scales", "[..., K/32]");
  check_e8m0(scales, "scales");
  const int64_t per_row = scales.size(-1);
  TORCH_CHECK_VALUE(per_row > 0, "scales: the last dim (K/32) must be >= 1, got shape ", scales.sizes());
  return with_trailing(scales, 1, {mx_scale_pairs_per_row(per_row), 2});
}

std::vector<int64_t> unpaired_shape(const at::Tensor& paired, int64_t k) {
  check_rank(paired, 2, "paired", "[..., ceil(K/64), 2]");
  check_e8m0(paired, "paired");
  TORCH_CHECK_VALUE(paired.size(-1) == 2, "paired: the last dim must be 2 (a pair of E8M0 scales), got shape ",
                    paired.sizes());
  const int64_t per_row = translate_errors([&] { return mx_scales_per_row(k, "k"); });
  TORCH_CHECK_VALUE(paired.size(-2) == mx_scale_pairs_per_row(per_row), "paired: for k = ", k,
                    " the pair dim must be ceil(K/64) = ", mx_scale_pairs_per_row(per_row), ", got shape ",
                    paired.sizes());
  return with_trailing(paired, 2, {per_row});
}

// K of GGUF MXFP4 rows [..., K/32 * 17].
int64_t gguf_k(const at::Tensor& blocks) {
  check_rank(blocks, 1, "blocks", "uint8 [..., K/32 * 17]");
  TORCH_CHECK_VALUE(blocks.scalar_type() == at::kByte, "blocks must be uint8 GGUF MXFP4 bytes, got ",
                    blocks.scalar_type());
  const int64_t row_bytes = blocks.size(-1);
  TORCH_CHECK_VALUE(row_bytes > 0 && row_bytes % kGgufMxfp4BlockBytes == 0, "blocks: a row of ", row_bytes,
                    " bytes is not a whole number of 17-byte MXFP4 blocks");
  return row_bytes / kGgufMxfp4BlockBytes * kMxBlockElems;
}

// K of split MXFP4 (elements [..., K/2], scales [..., K/32]), checked for consistency.
int64_t split_k(const at::Tensor& elements, const at::Tensor& scales) {
  check_rank(elements, 1, "elements", "[..., K/2]");
  TORCH_CHECK_VALUE(is_fp4_bytes(elements), "elements must hold packed E2M1 pairs as uint8, int8 or ",
                    "float4_e2m1fn_x2, got ", elements.scalar_type());
  check_e8m0(scales, "scales");
  TORCH_CHECK_VALUE(elements.device() == scales.device(), "elements is on ", elements.device(), " but scales is on ",
                    scales.device());
  const int64_t k = 2 * elements.size(-1);
  TORCH_CHECK_VALUE(k > 0 && k % kMxBlockElems == 0, "elements: K = 2 * ", elements.size(-1), " = ", k,
                    " must be a positive multiple of 32");
  const std::vector<int64_t> expected = with_trailing(elements, 1, {k / kMxBlockElems});
  TORCH_CHECK_VALUE(scales.sizes().vec() == expected, "scales must have shape ", at::IntArrayRef(expected),
                    " (one E8M0 per 32 elements of elements ", elements.sizes(), "), got ", scales.sizes());
  return k;
}

// ---- CPU ----------------------------------------------------------------------------------------

at::Tensor pair_scales_cpu(const at::Tensor& scales) {
  const std::vector<int64_t> shape = paired_shape(scales);
  const at::Tensor src = scales.contiguous();
  at::Tensor out = at::empty(shape, src.options());
  translate_errors([&] { pair_mx_scales(bytes_of(src), bytes_of(out), leading_rows(src, 1), src.size(-1)); });
  return out;
}

at::Tensor unpair_scales_cpu(const at::Tensor& paired, int64_t k) {
  const std::vector<int64_t> shape = unpaired_shape(paired, k);
  const at::Tensor src = paired.contiguous();
  at::Tensor out = at::empty(shape, src.options());
  translate_errors([&] { unpair_mx_scales(bytes_of(src), bytes_of(out), leading_rows(src, 2), shape.back()); });
  return out;
}

std::tuple<at::Tensor, at::Tensor> gguf_to_split_cpu(const at::Tensor& blocks) {
  const int64_t k = gguf_k(blocks);
  const at::Tensor src = blocks.contiguous();
  at::Tensor elements = at::empty(with_trailing(src, 1, {k / 2}), src.options());
  at::Tensor scales = at::empty(with_trailing(src, 1, {k / kMxBlockElems}), src.options());
  translate_errors(
      [&] { mxfp4_gguf_to_split(bytes_of(src), bytes_of(elements), bytes_of(scales), leading_rows(src, 1), k); });
  return {elements, scales};
}

at::Tensor split_to_gguf_cpu(const at::Tensor& elements, const at::Tensor& scales) {
  const int64_t k = split_k(elements, scales);
  // Both inputs are byte tensors whatever their dtype; read them as bytes.
  const at::Tensor el = elements.contiguous().view(at::kByte);
  const at::Tensor sc = scales.contiguous().view(at::kByte);
  at::Tensor out =
      at::empty(with_trailing(el, 1, {k / kMxBlockElems * kGgufMxfp4BlockBytes}), el.options().dtype(at::kByte));
  translate_errors([&] { mxfp4_split_to_gguf(bytes_of(el), bytes_of(sc), bytes_of(out), leading_rows(el, 1), k); });
  return out;
}

// ---- Meta (shapes only, for torch.compile) ------------------------------------------------------

at::Tensor pair_scales_meta(const at::Tensor& scales) {
  return at::empty(paired_shape(scales), scales.options());
}

at::Tensor unpair_scales_meta(const at::Tensor& paired, int64_t k) {
  return at::empty(unpaired_shape(paired, k), paired.options());
}

std::tuple<at::Tensor, at::Tensor> gguf_to_split_meta(const at::Tensor& blocks) {
  const int64_t k = gguf_k(blocks);
  return {at::empty(with_trailing(blocks, 1, {k / 2}), blocks.options()),
          at::empty(with_trailing(blocks, 1, {k / kMxBlockElems}), blocks.options())};
}

at::Tensor split_to_gguf_meta(const at::Tensor& elements, const at::Tensor& scales) {
  const int64_t k = split_k(elements, scales);
  return at::empty(with_trailing(elements, 1, {k / kMxBlockElems * kGgufMxfp4BlockBytes}),
                   elements.options().dtype(at::kByte));
}

}  // namespace
}  // namespace lowbit::torch_ops

TORCH_LIBRARY_FRAGMENT(lowbit, m) {
  m.def("mx_pair_scales(Tensor scales) -> Tensor");
  m.def("mx_unpair_scales(Tensor paired, int k) -> Tensor");
  m.def("mxfp4_gguf_to_split(Tensor blocks) -> (Tensor elements, Tensor scales)");
  m.def("mxfp4_split_to_gguf(Tensor elements, Tensor scales) -> Tensor");
}

TORCH_LIBRARY_IMPL(lowbit, CPU, m) {
  using namespace lowbit::torch_ops;
  m.impl("mx_pair_scales", &pair_scales_cpu);
  m.impl("mx_unpair_scales", &unpair_scales_cpu);
  m.impl("mxfp4_gguf_to_split", &gguf_to_split_cpu);
  m.impl("mxfp4_split_to_gguf", &split_to_gguf_cpu);
}

TORCH_LIBRARY_IMPL(lowbit, Meta, m) {
  using namespace lowbit::torch_ops;
  m.impl("mx_pair_scales", &pair_scales_meta);
  m.impl("mx_unpair_scales", &unpair_scales_meta);
  m.impl("mxfp4_gguf_to_split", &gguf_to_split_meta);
  m.impl("mxfp4_split_to_gguf", &split_to_gguf_meta);
}
