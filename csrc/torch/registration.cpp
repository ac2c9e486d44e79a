// The lowbit op library: one schema per op; CPU, CUDA and Meta kernels register elsewhere.
#include <torch/library.h>

TORCH_LIBRARY(lowbit, m) {
  m.def("dequantize(Tensor w, int qtype, int k=-1, *, Tensor? scales=None, ScalarType? dtype=None) -> Tensor");
  m.def("linear(Tensor x, Tensor w, int qtype, *, Tensor? scales=None, Tensor? bias=None) -> Tensor");
  m.def("quantize(Tensor w, int qtype, *, int scale_rule=0) -> (Tensor, Tensor)");
  m.def(
      "fused_moe(Tensor x, Tensor w13, Tensor w2, Tensor topk_weights, Tensor topk_ids, *, int w13_type, "
      "int w2_type, str activation=\"silu\", Tensor? w13_scales=None, Tensor? w2_scales=None, "
      "int[]? expert_range=None) -> Tensor");
}
