// The dispatcher's policy: which dense kernel runs for (type, M, N, K, device). Pure functions
// over measured thresholds kept as data (src/dispatch_policy.cpp); no CUDA, no torch.
#pragma once

#include <cstdint>
#include <string>

#include "lowbit/quant_type.h"

namespace lowbit {

enum class DenseKernel : int32_t {
  kMmvq = 0,           // few tokens: one pass over the quantized weight
  kMmq = 1,            // tiled GEMM on the quantized weight (Hopper wgmma)
  kDequantMatmul = 2,  // decode to bf16 at memory speed, then the framework's bf16 GEMM
  kCpuReference = 3,   // no GPU: decode on the CPU, then the CPU GEMM
};

const char* dense_kernel_name(DenseKernel k);
// "auto" is not a kernel; throws lowbit::Error naming `arg` for unknown names.
DenseKernel parse_dense_kernel(const std::string& name, const char* arg = "kernel");

// What the policy needs to know about the device; compute_major == 0 means the CPU.
struct DeviceFacts {
  int compute_major = 0;
  int compute_minor = 0;
  int multiprocessors = 0;
  int shared_per_block_optin = 0;  // bytes of shared memory one block may take (0: unknown, 48 KB)
  int shared_per_sm = 0;           // bytes per SM (0: unknown, 96 KB)
  bool mmq = false;                // this build's MMQ kernels run here (sm_90a code on a 9.0 device)
};

// How MMVQ multiplies.
//   kInt8: weights as their exact int8 codes, activations quantized per token and 32 weights to
//     int8 (scale amax / 127, round to nearest even: the precision of ggml's q8_1), int32 dot
//     products (dp4a for up to four tokens where that is faster for the format, tensor cores
//     otherwise), scaled into float32. For every type but MXFP8, M <= 8.
//   kBf16: weights decoded to bf16 (scale * code rounded once), activations rounded to bf16,
//     float32 accumulation on tensor cores. Every type, M <= 16.
//   kAuto: kInt8 where it exists (the faster), else kBf16.
// With either, a NaN activation gives NaN outputs for its token.
enum class MmvqMath : int { kAuto = 0, kBf16 = 1, kInt8 = 2 };

const char* mmvq_math_name(MmvqMath math);
// "auto", "bf16" or "int8"; throws lowbit::Error naming `arg` otherwise.
MmvqMath parse_mmvq_math(const std::string& name, const char* arg = "math");
// Whether kInt8 serves (t, m): t has an int8 form and 1 <= m <= kMmvqInt8MaxTokens.
bool mmvq_int8_supported(QuantType t, int64_t m);
// The arithmetic a call with `requested` runs: kAuto becomes kInt8 where supported, else kBf16.
MmvqMath resolve_mmvq_math(QuantType t, int64_t m, MmvqMath requested);

struct DenseChoice {
  DenseKernel kernel;
  std::string reason;  // why, in one sentence, for logs and `explain`
};

// The kernel and reason of plan_linear (lowbit/plan.h), which this wraps.
DenseChoice select_dense(QuantType t, int64_t m, int64_t n, int64_t k, const DeviceFacts& device);

// Largest M for which MMVQ (in passes of kMmvqMaxTokens) beats the alternatives for this type on
// this device (the tuning table's row for its architecture; 8 for GPUs never measured).
int mmvq_max_tokens(QuantType t, const DeviceFacts& device);

}  // namespace lowbit
