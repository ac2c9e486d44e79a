// The mmq op: its schema and its CPU implementation (the reference: decode, then torch's CPU GEMM).
#include <torch/library.h>

#include "lowbit/cpu.h"
#include "op_plans.h"

namespace lowbit::torch_ops {
namespace {

at::Tensor mmq_cpu(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const std::optional<at::Tensor>& scales) {
  const LinearPlan p = plan_mmq(x, w, qtype, scales);
  at::Tensor wf = at::empty({p.w.rows, p.w.k}, at::TensorOptions().dtype(at::kFloat));
  translate_errors([&] { cpu::dequantize(p.w.type, p.w.view, p.w.rows, p.w.k, wf.data_ptr(), FloatType::F32, p.w.k); });
  return at::matmul(x.reshape({p.m, p.w.k}).to(at::kFloat), wf.t()).to(x.scalar_type()).reshape(p.out_shape);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(lowbit, m) {
  // The tiled GEMM on the quantized weight, for direct calls: x [..., K] -> [..., N]. CUDA: MMQ on
  // a compute capability 9.0 device with the sm_90a kernels, dequantize + bf16 GEMM on others.
  m.def("mmq(Tensor x, Tensor w, int qtype, *, Tensor? scales=None) -> Tensor");
}

TORCH_LIBRARY_IMPL(lowbit, CPU, m) {
  m.impl("mmq", &mmq_cpu);
}

}  // namespace lowbit::torch_ops
