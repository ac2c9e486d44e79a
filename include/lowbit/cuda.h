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

size_t mmvq_workspace_bytes(QuantType t, int64_t m, int64_t k, MmvqMath math = MmvqMath::kAuto);

// The MMVQ kernels: dp4a lanes (up to 4 tokens; one or two quantized inside the kernel, three or
// four by the quantizing kernel), int8 tensor cores (up to 8 tokens, after a kernel that
// quantizes the activations), bf16
// tensor cores (up to 16 tokens: 9 to 16 tokens, MXFP8, math = kBf16, or where the others do
// not fit).
enum class MmvqKernel : int { kDp4a = 0, kInt8TensorCores = 1, kBf16TensorCores = 2 };
const char* mmvq_kernel_name(MmvqKernel kernel);  // "dp4a", "int8_tensor_cores", "bf16_tensor_cores"

// The kernel mmvq(t, w, n, k, ..., m, ..., math) runs on the current device: the choice mmvq
// makes by format, token count, arithmetic and the device's shared memory (a host-side query;
// for N = 0, where mmvq launches nothing, the kernel a non-empty call would run). Checks the
// type, K and M as mmvq does.
MmvqKernel mmvq_kernel(QuantType t, int64_t n, int64_t k, int64_t m, MmvqMath math = MmvqMath::kAuto);

// Whether mmvq(t, w, n, k, ..., m, ..., math) on the current device reads its workspace (the int8
// activations' prologue runs: int8 tensor cores, or dp4a at three or four tokens), so that a
// caller allocates mmvq_workspace_bytes only then. Checks its arguments as mmvq_kernel does.
bool mmvq_reads_workspace(QuantType t, int64_t n, int64_t k, int64_t m, MmvqMath math = MmvqMath::kAuto);

}  // namespace lowbit::cuda
