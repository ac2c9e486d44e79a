// One plan per operation: what the planner decides for a call, before anything runs. A plan names
// the kernel, its configuration (MMVQ launch shape; MMQ tiles; an MoE plan), the bytes of
// caller workspace its execution reads (0 when none) and the reason. The planner is pure C++
// over (operation, types, shapes, device facts, options) in src/; lowbit::cuda::execute (cuda.h)
// runs a plan, and the torch ops and lowbit.select_kernel report and run the same one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "lowbit/dispatch.h"
#include "lowbit/mmq_policy.h"
#include "lowbit/quant_type.h"

namespace lowbit {

// Dequantize has one kernel and nothing to plan: lowbit::cuda::dequantize runs it.
enum class Operation : int32_t { kLinear = 0, kMoe = 1 };
const char* operation_name(Operation op);  // "linear", "moe"

// The MMVQ kernels: dp4a lanes (up to 4 tokens; one or two quantized inside the kernel, three or
// four by the quantizing prologue), int8 tensor cores (up to 8 tokens, after the prologue), bf16
// tensor cores (up to 16 tokens: 9 to 16 tokens, MXFP8, math = kBf16, or where the others do not
// fit the device's shared memory).
enum class MmvqKernel : int32_t { kDp4a = 0, kInt8TensorCores = 1, kBf16TensorCores = 2 };
const char* mmvq_kernel_name(MmvqKernel kernel);  // "dp4a", "int8_tensor_cores", "bf16_tensor_cores"

// One MMVQ launch over the whole weight for `tokens` tokens (one pass).
struct MmvqConfig {
  MmvqKernel kernel = MmvqKernel::kBf16TensorCores;
  MmvqMath math = MmvqMath::kBf16;  // resolved, never kAuto
  int tokens = 0;                   // tokens of the pass
  int kernel_tokens = 0;            // tokens the kernel is compiled for (>= tokens)
  unsigned blocks = 0;              // launch shape of the MMVQ kernel
  int threads = 0;
  int shared_bytes = 0;
  bool int8_prologue = false;  // a kernel quantizes the activations into the workspace first
  size_t workspace_bytes = 0;  // what the pass reads of the workspace (0 when none)
};

// The MoE plan (routing, then the gate/up and down projections as grouped GEMMs or vector
// passes): defined by the MoE policy (src/moe_policy.cpp) and carried here by pointer, so that a
// plan holds it without a query of its own.
struct MoePlan;

struct Plan {
  Operation operation = Operation::kLinear;
  DenseKernel kernel = DenseKernel::kCpuReference;
  QuantType type{};
  int64_t m = 0, n = 0, k = 0;
  // kernel == kMmvq: passes of mmvq.tokens tokens, the last one mmvq_last (== mmvq for one pass
  // or when M is a whole number of passes)
  int64_t passes = 0;
  MmvqConfig mmvq, mmvq_last;
  MmqConfig mmq;                       // kernel == kMmq (lowbit/mmq_policy.h): tiles, split, workspace
  std::shared_ptr<const MoePlan> moe;  // operation == kMoe
  // Bytes of caller workspace the execution reads, 16-byte aligned (0 when none): MMVQ's int8
  // activations; dequant_matmul's bf16 weight [N, K], which execute fills for the caller's GEMM.
  size_t workspace_bytes = 0;
  std::string reason;  // one sentence, for logs and select_kernel
};

struct PlanOptions {
  std::optional<DenseKernel> kernel;  // force a kernel (benchmarks, tests); empty: the policy's choice
  MmvqMath math = MmvqMath::kAuto;    // MMVQ's and MMQ's arithmetic
};

// The plan of y [M, N] = x [M, K] W^T for a weight of type t on `device`. Checks the type, M >= 0
// (M = 0: a plan that runs nothing), N >= 0 and K (a whole number of blocks); a forced kernel must exist for the device
// (mmq: device.mmq; mmvq / dequant_matmul: a GPU; cpu_reference: the CPU).
Plan plan_linear(QuantType t, int64_t m, int64_t n, int64_t k, const DeviceFacts& device,
                 const PlanOptions& options = {});

// The plan of one MMVQ pass of M <= kMmvqMaxTokens tokens (the kernel, arithmetic and launch
// shape), checked as plan_linear checks; `math` kInt8 requires mmvq_int8_supported(t, m).
// plan_mmvq_pass's argument checks alone (no device facts needed): callers check before they ask
// the device.
void check_mmvq_pass(QuantType t, int64_t m, int64_t n, int64_t k, MmvqMath math = MmvqMath::kAuto);

MmvqConfig plan_mmvq_pass(QuantType t, int64_t m, int64_t n, int64_t k, const DeviceFacts& device,
                          MmvqMath math = MmvqMath::kAuto);

// kernel, configuration, workspace and reason in one line (logs, tests, Python).
std::string describe_plan(const Plan& plan);

}  // namespace lowbit
