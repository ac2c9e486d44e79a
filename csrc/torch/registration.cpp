// The lowbit op library: one schema per op; CPU, CUDA and Meta kernels register elsewhere.
#include <torch/library.h>

#include "lowbit/dispatch.h"
#include "tensor_args.h"

namespace {
// The dispatcher's choice for a dense layer on `device` (lowbit::DenseKernel as int).
int64_t select_dense_kernel(int64_t qtype, int64_t m, int64_t n, int64_t k, c10::Device device);
}  // namespace

TORCH_LIBRARY(lowbit, m) {
  m.def("dequantize(Tensor w, int qtype, int k=-1, *, Tensor? scales=None, ScalarType? dtype=None) -> Tensor");
  // route: "auto" (the dispatcher's choice) or a kernel name to force one (benchmarks, tests).
  // Not called `kernel`: Inductor's FallbackKernel.create takes a parameter of that name.
  m.def(
      "linear(Tensor x, Tensor w, int qtype, *, Tensor? scales=None, Tensor? bias=None, str route=\"auto\") -> "
      "Tensor");
  // The MMVQ kernel itself, for direct calls: x [M <= 16, K] -> [M, N].
  m.def("mmvq(Tensor x, Tensor w, int qtype, *, Tensor? scales=None, str math=\"auto\") -> Tensor");
  // The tiled GEMM on the quantized weight, for direct calls: x [..., K] -> [..., N]. CUDA: MMQ on
  // a compute capability 9.0 device with the sm_90a kernels, dequantize + bf16 GEMM on others.
  m.def("mmq(Tensor x, Tensor w, int qtype, *, Tensor? scales=None, str math=\"auto\") -> Tensor");
  m.def("quantize(Tensor w, int qtype, *, int scale_rule=0) -> (Tensor, Tensor)");
  m.def(
      "fused_moe(Tensor x, Tensor w13, Tensor w2, Tensor topk_weights, Tensor topk_ids, *, int w13_type, "
      "int w2_type, str activation=\"silu\", Tensor? w13_scales=None, Tensor? w2_scales=None, "
      "int[]? expert_range=None) -> Tensor");
  m.def("select_dense_kernel(int qtype, int m, int n, int k, Device device) -> int", &select_dense_kernel);
}

namespace {
int64_t select_dense_kernel(int64_t qtype, int64_t m, int64_t n, int64_t k, c10::Device device) {
  const auto& info = lowbit::torch_ops::translate_errors(
      [&]() -> const lowbit::TypeInfo& { return lowbit::weight_type_info(qtype, "qtype"); });
  const lowbit::DeviceFacts facts = lowbit::torch_ops::device_facts(device);
  return static_cast<int64_t>(
      lowbit::torch_ops::translate_errors([&] { return lowbit::select_dense(info.type, m, n, k, facts).kernel; }));
}
}  // namespace
