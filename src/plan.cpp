// The dense planner: from (type, M, N, K, device facts, options) to the plan a call runs.
#include <sstream>

#include "cuda/tuning/tuning.h"
#include "lowbit/cuda_limits.h"
#include "lowbit/error.h"
#include "lowbit/formats/all.h"
#include "lowbit/mmq_policy.h"
#include "lowbit/plan.h"
#include "lowbit/weights.h"

namespace lowbit {

const char* operation_name(Operation op) {
  switch (op) {
    case Operation::kLinear:
      return "linear";
    case Operation::kMoe:
      return "moe";
  }
  return "unknown";
}

const char* mmvq_kernel_name(MmvqKernel kernel) {
  switch (kernel) {
    case MmvqKernel::kDp4a:
      return "dp4a";
    case MmvqKernel::kInt8TensorCores:
      return "int8_tensor_cores";
    case MmvqKernel::kBf16TensorCores:
      return "bf16_tensor_cores";
  }
  return "unknown";
}

namespace {

// The kernel a call runs when the caller forces none: the CPU reference without a GPU, MMQ in its
// measured range where the device runs it, and below it MMQ's int8 path where that was measured
// ahead of MMVQ (math auto: the tuning rows' dense_min_tokens) or where int8 is asked for beyond
// the int8 MMVQ's tokens; MMVQ up to the measured limit, dequantize + bf16 GEMM above it.
DenseKernel choose(QuantType t, int64_t m, int64_t k, const DeviceFacts& device, MmvqMath math,
                   std::ostringstream& why) {
  if (device.compute_major == 0) {
    why << "no GPU: the CPU decodes the weight and multiplies with torch's CPU GEMM";
    return DenseKernel::kCpuReference;
  }
  if (device.mmq && tuning::mmq_serves(m, k, device.compute_major)) {
    why << "M = " << m << " in the measured MMQ range for K = " << k << " on sm_" << device.compute_major
        << device.compute_minor;
    return DenseKernel::kMmq;
  }
  const int int8_from = tuning::mmq_int8_dense_min_tokens(t);
  const bool below_mmq = device.mmq && device.compute_major == 9 && m <= kMmvqMaxTokens;
  if (below_mmq && math == MmvqMath::kAuto && int8_from > 0 && m >= int8_from && mmq_int8_by_default(t, 16)) {
    why << "M = " << m << " >= " << int8_from << ": MMQ's int8 path ahead of MMVQ for " << type_name(t) << " on sm_"
        << device.compute_major << device.compute_minor;
    return DenseKernel::kMmq;
  }
  if (below_mmq && math == MmvqMath::kInt8 && m > kMmvqInt8MaxTokens && mmq_int8_supported(t)) {
    why << "M = " << m << " > " << kMmvqInt8MaxTokens << " with int8 asked for: MMQ's int8 path (the int8 MMVQ serves "
        << "up to " << kMmvqInt8MaxTokens << " tokens)";
    return DenseKernel::kMmq;
  }
  const int limit = mmvq_max_tokens(t, device);
  if (m <= limit) {
    why << "M = " << m << " <= " << limit << " (measured MMVQ limit for " << type_name(t) << " on sm_"
        << device.compute_major << device.compute_minor << ")";
    return DenseKernel::kMmvq;
  }
  why << "M = " << m << " > " << limit << " (the MMVQ limit) and outside MMQ's measured range for K = " << k
      << ": decode to bf16 at memory speed, then cuBLAS bf16 GEMM";
  return DenseKernel::kDequantMatmul;
}

void check_forced(DenseKernel kernel, const DeviceFacts& device) {
  LOWBIT_CHECK(kernel != DenseKernel::kMmq || device.mmq, "kernel: mmq needs a compute capability 9.0 GPU and a ",
               "build for sm_90a (LOWBIT_CUDA_ARCHS holding 90a); here use mmvq or dequant_matmul");
  const bool gpu = device.compute_major > 0;
  LOWBIT_CHECK(gpu || kernel == DenseKernel::kCpuReference, "kernel: ", dense_kernel_name(kernel),
               " needs a CUDA device; the CPU runs cpu_reference");
  LOWBIT_CHECK(!gpu || kernel != DenseKernel::kCpuReference,
               "kernel: cpu_reference runs on the CPU; a CUDA device runs mmvq or dequant_matmul");
}

}  // namespace

Plan plan_linear(QuantType t, int64_t m, int64_t n, int64_t k, const DeviceFacts& device, const PlanOptions& options) {
  weight_type_info(static_cast<int64_t>(t), "qtype");
  LOWBIT_CHECK(m >= 0, "m: M = ", m, " must be >= 0");
  LOWBIT_CHECK(n >= 0, "n: N = ", n, " must be >= 0");
  row_bytes(t, k, "k");  // K a positive whole number of blocks
  Plan p;
  p.operation = Operation::kLinear;
  p.type = t, p.m = m, p.n = n, p.k = k;
  std::ostringstream why;
  if (options.kernel.has_value()) {
    check_forced(*options.kernel, device);
    p.kernel = *options.kernel;
    why << "kernel \"" << dense_kernel_name(p.kernel) << "\" forced by the caller";
  } else {
    p.kernel = choose(t, m, k, device, options.math, why);
  }
  if (p.kernel == DenseKernel::kMmvq && m == 0) {
    why << ": no tokens, nothing to run";  // an empty call: no pass, no workspace
  } else if (p.kernel == DenseKernel::kMmvq) {
    // one arithmetic for every pass: past the int8 token limit, bf16 throughout
    MmvqMath math = options.math;
    if (math == MmvqMath::kAuto && m > kMmvqInt8MaxTokens) math = MmvqMath::kBf16;
    p.passes = (m + kMmvqMaxTokens - 1) / kMmvqMaxTokens;
    const int64_t full = m < kMmvqMaxTokens ? m : kMmvqMaxTokens;
    const int64_t last = m - (p.passes - 1) * kMmvqMaxTokens;
    p.mmvq = plan_mmvq_pass(t, full, n, k, device, math);
    p.mmvq_last = last == full ? p.mmvq : plan_mmvq_pass(t, last, n, k, device, math);
    p.workspace_bytes =
        p.mmvq.workspace_bytes > p.mmvq_last.workspace_bytes ? p.mmvq.workspace_bytes : p.mmvq_last.workspace_bytes;
    why << ": " << p.passes << " pass" << (p.passes > 1 ? "es" : "") << " over the " << n << "x" << k
        << " quantized weight, "
        << (p.mmvq.math == MmvqMath::kInt8 ? "int8 weights and activations" : "bf16 arithmetic") << " ("
        << mmvq_kernel_name(p.mmvq.kernel) << ")";
  } else if (p.kernel == DenseKernel::kMmq) {
    p.mmq = select_mmq_config(t, m, n, k, device, options.math);
    p.workspace_bytes = p.mmq.workspace_bytes();
    why << ": weights decoded on chip into wgmma, " << p.mmq.tokens_per_tile << "-token tiles, "
        << (p.mmq.int8 ? "int8 weights and activations" : "bf16 arithmetic");
  } else if (p.kernel == DenseKernel::kDequantMatmul) {
    p.workspace_bytes = static_cast<size_t>(n) * static_cast<size_t>(k) * 2;  // the bf16 weight
  }
  p.reason = why.str();
  return p;
}

std::string describe_plan(const Plan& p) {
  std::ostringstream s;
  s << operation_name(p.operation) << " " << type_name(p.type) << " M=" << p.m << " N=" << p.n << " K=" << p.k << ": "
    << dense_kernel_name(p.kernel);
  auto pass = [&](const MmvqConfig& c) {
    s << mmvq_kernel_name(c.kernel) << " " << mmvq_math_name(c.math) << ", " << c.tokens << " token"
      << (c.tokens > 1 ? "s" : "") << " (kernel of " << c.kernel_tokens << "), grid " << c.blocks << " x " << c.threads
      << ", " << c.shared_bytes << " B shared" << (c.int8_prologue ? ", int8 prologue" : "");
  };
  if (p.kernel == DenseKernel::kMmvq) {
    s << " (" << p.passes << " pass" << (p.passes > 1 ? "es" : "") << ": ";
    pass(p.mmvq);
    if (p.passes > 1 && p.mmvq_last.tokens != p.mmvq.tokens) {
      s << "; last ";
      pass(p.mmvq_last);
    }
    s << ")";
  } else if (p.kernel == DenseKernel::kMmq) {
    s << " (" << (p.mmq.int8 ? "int8 " : "bf16 ") << p.mmq.rows_per_tile << " x " << p.mmq.tokens_per_tile
      << " tiles, K split " << p.mmq.splits << ")";
  }
  s << ", workspace " << p.workspace_bytes << " B; " << p.reason;
  return s.str();
}

}  // namespace lowbit
