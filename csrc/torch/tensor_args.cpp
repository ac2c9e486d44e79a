#include "tensor_args.h"

#include <c10/util/Exception.h>

#if defined(LOWBIT_TORCH_CUDA)
#include <c10/cuda/CUDAFunctions.h>

#include "lowbit/cuda.h"
#endif

namespace lowbit::torch_ops {
namespace {

bool is_byte_like(const at::Tensor& t) {
  return t.scalar_type() == at::kByte;
}

bool element_dtype_ok(QuantType t, const at::Tensor& w) {
  if (is_byte_like(w)) return true;
  if (t == QuantType::MXFP8_E4M3) return w.scalar_type() == at::kFloat8_e4m3fn;
  if (t == QuantType::MXFP4_SPLIT) return w.scalar_type() == at::kFloat4_e2m1fn_x2;
  return false;
}

}  // namespace

FloatType float_type(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return FloatType::F32;
    case at::kBFloat16:
      return FloatType::BF16;
    case at::kHalf:
      return FloatType::F16;
    default:
      TORCH_CHECK_VALUE(false, "dtype must be float32, bfloat16 or float16, got ", t);
  }
}

DeviceFacts device_facts(const c10::Device& device) {
#if defined(LOWBIT_TORCH_CUDA)
  if (device.is_cuda())
    return translate_errors(
        [&] { return cuda::device_facts(device.index() < 0 ? c10::cuda::current_device() : device.index()); });
#endif
  return DeviceFacts{};
}

void check_same_device(const at::Tensor& a, const char* a_name, const at::Tensor& b, const char* b_name) {
  TORCH_CHECK_VALUE(a.device() == b.device(), a_name, " is on ", a.device(), " but ", b_name, " is on ", b.device(),
                    "; all tensors of a call must be on one device");
}

WeightArg weight_arg(const at::Tensor& w, int64_t qtype, int64_t k, const std::optional<at::Tensor>& scales,
                     const char* w_name, const char* scales_name, bool allow_3d, const char* type_name) {
  const TypeInfo& info = translate_errors([&]() -> const TypeInfo& { return weight_type_info(qtype, type_name); });
  WeightArg a{info.type, &info, 0, 0, 0, {}, 0};
  TORCH_CHECK_VALUE(k == -1 || k > 0, "k must be -1 (derive it from ", w_name, "'s rows) or a positive K, got ", k);
  TORCH_CHECK_VALUE(w.dim() == 2 || (allow_3d && w.dim() == 3), w_name, " must be ",
                    allow_3d ? "2-D [N, row_bytes] or 3-D [E, N, row_bytes]" : "2-D [N, row_bytes]", ", got shape ",
                    w.sizes());
  TORCH_CHECK_VALUE(element_dtype_ok(info.type, w), w_name, " must be uint8 bytes",
                    info.type == QuantType::MXFP8_E4M3    ? " (or float8_e4m3fn)"
                    : info.type == QuantType::MXFP4_SPLIT ? " (or float4_e2m1fn_x2)"
                                                          : "",
                    " for ", info.name, ", got ", w.scalar_type());
  TORCH_CHECK_VALUE(w.is_contiguous(), w_name, " must be contiguous (row-major blocks), got strides ", w.strides());
  a.experts = w.dim() == 3 ? w.size(0) : 0;
  a.rows = w.size(-2);
  a.total_rows = w.dim() == 3 ? a.experts * a.rows : a.rows;
  const int64_t row_bytes = w.size(-1);
  TORCH_CHECK_VALUE(row_bytes > 0 && row_bytes % info.block_bytes == 0, w_name, ": a row of ", row_bytes,
                    " bytes is not a whole number of ", info.name, " blocks (", info.block_bytes, " bytes each)");
  const int64_t derived_k = row_bytes / info.block_bytes * info.block_elems;
  TORCH_CHECK_VALUE(k == -1 || k == derived_k, "k: ", k, " is inconsistent with ", w_name, "'s rows of ", row_bytes,
                    " bytes, which hold K = ", derived_k, " ", info.name, " weights");
  a.k = derived_k;
  const bool meta = w.is_meta();
  a.view.data = meta ? nullptr : w.data_ptr();
  a.view.row_stride = row_bytes;
  a.view.expert_stride = a.rows * row_bytes;
  if (info.split_scales) {
    TORCH_CHECK_VALUE(scales.has_value(), scales_name, " is required: ", info.name,
                      " keeps its E8M0 scales in a separate tensor [", w.dim() == 3 ? "E, " : "", "N, K/32]");
    const at::Tensor& s = *scales;
    check_same_device(s, scales_name, w, w_name);
    TORCH_CHECK_VALUE(s.scalar_type() == at::kByte || s.scalar_type() == at::kFloat8_e8m0fnu, scales_name,
                      " must be uint8 or float8_e8m0fnu E8M0 codes, got ", s.scalar_type());
    std::vector<int64_t> expected(w.sizes().begin(), w.sizes().end());
    expected.back() = derived_k / 32;
    TORCH_CHECK_VALUE(s.sizes().vec() == expected, scales_name, " must have shape ", at::IntArrayRef(expected),
                      " (one E8M0 per 32 weights), got ", s.sizes());
    TORCH_CHECK_VALUE(s.is_contiguous(), scales_name, " must be contiguous");
    a.view.scales = meta ? nullptr : static_cast<const uint8_t*>(s.data_ptr());
    a.view.scale_row_stride = derived_k / 32;
    a.view.scale_expert_stride = a.rows * (derived_k / 32);
  } else {
    TORCH_CHECK_VALUE(!scales.has_value(), scales_name, " must be None: ", info.name,
                      " stores its scales inside its blocks (only split MX types take a scales tensor)");
  }
  return a;
}

void check_activation(const at::Tensor& x, const char* name, const at::Tensor& w, const char* w_name) {
  TORCH_CHECK_VALUE(x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf,
                    name, " must be float32, bfloat16 or float16, got ", x.scalar_type());
  check_same_device(x, name, w, w_name);
}

}  // namespace lowbit::torch_ops
