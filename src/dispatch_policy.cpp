// Dense kernel selection. Thresholds are data measured on real GPUs (benchmarks/results/); a GPU
// never measured gets the conservative default.
#include <sstream>

#include "lowbit/cuda_limits.h"
#include "lowbit/dispatch.h"
#include "lowbit/error.h"
#include "lowbit/formats/all.h"
#include "lowbit/weights.h"

namespace lowbit {
namespace {

// MMVQ (in passes of kMmvqMaxTokens tokens) is faster than dequantize + bf16 GEMM up to this many
// tokens.
struct MmvqLimit {
  int compute_major;  // 0: any architecture
  QuantType type;     // QuantType{0}: any type
  int max_tokens;
};

// Measured: benchmarks/results/h200/dense-20261129-02d83ef.csv and benchmarks/NOTES.md
// ("dispatcher thresholds").
constexpr MmvqLimit kMmvqLimits[] = {
    // H200: one pass beats dequant + cuBLAS by 2.1-2.8x at M = 16, two passes by 1.06-1.53x at
    // M = 24 and 32, for every type; three passes (~1.5x the two-pass time) would lose.
    {9, QuantType{0}, 32},
    {0, QuantType{0}, 8},  // not measured: stay where one pass is surely ahead
};

// Token counts where MMQ beats both MMVQ (in passes) and dequantize + cuBLAS.
struct MmqRange {
  int compute_major;
  int min_tokens, max_tokens;
};

// Measured on the H200 (benchmarks/results/h200/mmq-20261201-*.csv, N=4096 K=14336, IQ4_XS and
// IQ2_XXS; benchmarks/NOTES.md "MMQ"): MMVQ stays ahead up to 16 tokens (iq4_xs 36 vs 44 us); MMQ
// leads from 17 (iq4_xs M=32 50 vs 71 us) to 128 tokens (73 vs 80 us); at 512 the two tie and
// from 2048 dequantize + cuBLAS is ahead. 129 to 511 tokens were not measured: cuBLAS keeps them.
constexpr MmqRange kMmqRanges[] = {{9, 17, 128}};

bool mmq_serves(int64_t m, const DeviceFacts& device) {
  if (!device.mmq) return false;
  for (const MmqRange& r : kMmqRanges)
    if (r.compute_major == device.compute_major) return m >= r.min_tokens && m <= r.max_tokens;
  return false;
}

}  // namespace

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
  for (const MmvqLimit& l : kMmvqLimits) {
    const bool arch = l.compute_major == 0 || l.compute_major == device.compute_major;
    const bool type = l.type == QuantType{0} || l.type == t;
    if (arch && type) return l.max_tokens;
  }
  return 1;
}

DenseChoice select_dense(QuantType t, int64_t m, int64_t n, int64_t k, const DeviceFacts& device) {
  weight_type_info(static_cast<int64_t>(t), "qtype");
  LOWBIT_CHECK(m >= 0, "m: M = ", m, " must be >= 0");
  LOWBIT_CHECK(n >= 0, "n: N = ", n, " must be >= 0");
  row_bytes(t, k, "k");  // K a positive whole number of blocks
  std::ostringstream why;
  if (device.compute_major == 0) {
    why << "no GPU: the CPU decodes the weight and multiplies with torch's CPU GEMM";
    return {DenseKernel::kCpuReference, why.str()};
  }
  if (mmq_serves(m, device)) {
    why << "M = " << m << " in the measured MMQ range on sm_" << device.compute_major << device.compute_minor
        << ": weights decoded on chip into wgmma, one pass over the " << n << "x" << k << " quantized weight per "
        << "token tile";
    return {DenseKernel::kMmq, why.str()};
  }
  const int limit = mmvq_max_tokens(t, device);
  if (m <= limit) {
    const int64_t passes = (m + kMmvqMaxTokens - 1) / kMmvqMaxTokens;
    why << "M = " << m << " <= " << limit << " (measured MMVQ limit for " << type_name(t) << " on sm_"
        << device.compute_major << device.compute_minor << "): " << passes << " pass" << (passes > 1 ? "es" : "")
        << " over the " << n << "x" << k << " quantized weight, "
        << (mmvq_int8_supported(t, m) ? "int8 weights and activations" : "bf16 arithmetic");
    return {DenseKernel::kMmvq, why.str()};
  }
  why << "M = " << m << " > " << limit << ": decode to bf16 at memory speed, then cuBLAS bf16 GEMM (no MMQ yet)";
  return {DenseKernel::kDequantMatmul, why.str()};
}

}  // namespace lowbit
