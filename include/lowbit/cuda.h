// lowbit's CUDA API: kernels over raw device pointers and a cudaStream_t. No torch.
// Every call validates its arguments (lowbit::Error naming the argument), enqueues work on
// `stream` without synchronizing, allocates nothing but mmvq's stream-ordered workspace where
// the caller passes none, and is safe to capture in a CUDA graph.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "lowbit/cpu.h"
#include "lowbit/cuda_limits.h"
#include "lowbit/dispatch.h"
#include "lowbit/plan.h"
#include "lowbit/quant_type.h"
#include "lowbit/weights.h"

namespace lowbit::cuda {

// Decodes rows [0, rows) of a weight on the device into out (row r at out + r * out_row_stride
// elements). float32 output is bit-exact with the CPU reference (and ggml); bf16 / fp16 outputs
// are the float32 values rounded to nearest even. Requires 16-byte aligned out and w.data.
void dequantize(QuantType t, const WeightView& w, int64_t rows, int64_t k, void* out, FloatType out_type,
                int64_t out_row_stride, cudaStream_t stream);

// y[m, n] = sum_k x[m, k] W[n, k] for m < M <= 16 tokens, in one pass over the weight.
// x: [M, K] (row stride x_row_stride elements) in x_type; y: [M, N] in the same type; float32
// accumulation; `math` picks the arithmetic (lowbit/dispatch.h). Requires w.data and x 16-byte
// aligned, x_row_stride a multiple of 8, y not overlapping x; the weight (and its scales) must
// not be written by the kernel just before on the stream unless that kernel runs to its end
// (the MMVQ kernels start reading weights while the kernel before them finishes, sm_90).
// The int8 arithmetic quantizes the activations once: inside the MMVQ kernel for one or two
// tokens where the format runs the dp4a kernel there and they fit a block's shared memory, else
// by a small kernel into a workspace of mmvq_workspace_bytes(t, m, k, math) bytes (0 when the
// call runs bf16; sized whichever kernel runs, and unused by the first case, which
// mmvq_reads_workspace tells apart): pass 16-byte aligned device memory of at least that size, or
// nullptr to have the call take it stream-ordered from the device's default memory pool
// (cudaMallocAsync / cudaFreeAsync, CUDA-graph capturable) where it is read.
void mmvq(QuantType t, const WeightView& w, int64_t n, int64_t k, const void* x, FloatType x_type, int64_t m,
          int64_t x_row_stride, void* y, int64_t y_row_stride, cudaStream_t stream, MmvqMath math = MmvqMath::kAuto,
          void* workspace = nullptr, size_t workspace_bytes = 0);

// The int8 activations' bytes whenever `math` resolves to int8, whichever kernel runs (a size
// for callers that do not plan; plan_mmvq_pass's workspace_bytes is what a pass reads).
size_t mmvq_workspace_bytes(QuantType t, int64_t m, int64_t k, MmvqMath math = MmvqMath::kAuto);

// The MMVQ kernels (lowbit/plan.h), by their former names here.
using ::lowbit::mmvq_kernel_name;
using ::lowbit::MmvqKernel;

// The facts the planner needs of CUDA device `device` (-1: the current device).
DeviceFacts device_facts(int device = -1);

// The plan of y [M, N] = x [M, K] W^T on the current device (lowbit::plan_linear with its facts).
Plan plan_linear(QuantType t, int64_t m, int64_t n, int64_t k, const PlanOptions& options = {});

// Runs a plan of plan_linear on the current device: x [plan.m, K] (row stride x_row_stride
// elements, 16-byte aligned, stride a multiple of 8) in x_type, y [plan.m, N] in the same type,
// with the weight's requirements of mmvq. workspace: 16-byte aligned device memory of at least
// plan.workspace_bytes, or nullptr where the plan reads none (MMVQ also takes nullptr and then
// allocates stream-ordered). A dequant_matmul plan writes the weight as bf16 [N, K] into the
// workspace (required) and leaves y to the caller's GEMM; a cpu_reference plan is an error here.
void execute(const Plan& plan, const WeightView& w, const void* x, FloatType x_type, int64_t x_row_stride, void* y,
             int64_t y_row_stride, void* workspace, size_t workspace_bytes, cudaStream_t stream);

// Former queries, thin wrappers over plan_mmvq_pass on the current device (kept for callers):
// the kernel mmvq(t, w, n, k, ..., m, ..., math) runs (for N = 0, where mmvq launches nothing, the
// kernel a non-empty call would run), and whether it reads its workspace. Check the type, K and M
// as mmvq does.
MmvqKernel mmvq_kernel(QuantType t, int64_t n, int64_t k, int64_t m, MmvqMath math = MmvqMath::kAuto);
bool mmvq_reads_workspace(QuantType t, int64_t n, int64_t k, int64_t m, MmvqMath math = MmvqMath::kAuto);

}  // namespace lowbit::cuda
