// Names of the dense kernels and MMVQ arithmetics, and the dense policy's queries (thin wrappers
// over the planner, src/plan.cpp). Thresholds are data measured on real GPUs with their provenance
// (csrc/cuda/tuning/); a GPU never measured gets the conservative default.
#include <utility>

#include "cuda/tuning/tuning.h"
#include "lowbit/cuda_limits.h"
#include "lowbit/dispatch.h"
#include "lowbit/error.h"
#include "lowbit/formats/all.h"
#include "lowbit/plan.h"

namespace lowbit {
const char* dense_kernel_name(DenseKernel k) {
  switch (k) {
    case DenseKernel::kMmvq:
      return "mmvq";
    case DenseKernel::kMmq:
      return "mmq";
    case DenseKernel::kDequantMatmul:
      return "dequant_matmul";
    case DenseKernel::kCpuReference:
      return "cpu_reference";
  }
  return "unknown";
}

DenseKernel parse_dense_kernel(const std::string& name, const char* arg) {
  for (DenseKernel k : {DenseKernel::kMmvq, DenseKernel::kMmq, DenseKernel::kDequantMatmul, DenseKernel::kCpuReference})
    if (name == dense_kernel_name(k)) return k;
  detail::fail(arg, ": unknown kernel \"", name, "\" (auto, mmvq, mmq, dequant_matmul, cpu_reference)");
}

const char* mmvq_math_name(MmvqMath math) {
  switch (math) {
    case MmvqMath::kAuto:
      return "auto";
    case MmvqMath::kBf16:
      return "bf16";
    case MmvqMath::kInt8:
      return "int8";
  }
  return "unknown";
}

MmvqMath parse_mmvq_math(const std::string& name, const char* arg) {
  for (MmvqMath m : {MmvqMath::kAuto, MmvqMath::kBf16, MmvqMath::kInt8})
    if (name == mmvq_math_name(m)) return m;
  detail::fail(arg, ": unknown MMVQ arithmetic \"", name, "\" (auto, bf16, int8)");
}

bool mmvq_int8_supported(QuantType t, int64_t m) {
  const TypeInfo* info = find_type(static_cast<int64_t>(t));
  if (info == nullptr || !info->is_weight || m < 1 || m > kMmvqInt8MaxTokens) return false;
  return visit_weight_type(t, [](auto traits) { return HasInt8<decltype(traits)>::value; });
}

MmvqMath resolve_mmvq_math(QuantType t, int64_t m, MmvqMath requested) {
  if (requested != MmvqMath::kAuto) return requested;
  return mmvq_int8_supported(t, m) ? MmvqMath::kInt8 : MmvqMath::kBf16;
}

int mmvq_max_tokens(QuantType t, const DeviceFacts& device) {
  return tuning::mmvq_max_tokens(t, device.compute_major);
}

DenseChoice select_dense(QuantType t, int64_t m, int64_t n, int64_t k, const DeviceFacts& device) {
  Plan plan = plan_linear(t, m, n, k, device);
  return {plan.kernel, std::move(plan.reason)};
}

}  // namespace lowbit
