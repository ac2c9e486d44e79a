// MMQ over raw device pointers: y = x W^T for many tokens on the quantized weight (Hopper, sm_90
// with a build for sm_90a). No torch; like the rest of lowbit/cuda.h, every call validates its
// arguments (lowbit::Error naming the argument), enqueues work on `stream` without synchronizing
// and is safe to capture in a CUDA graph.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "lowbit/cpu.h"
#include "lowbit/mmq_policy.h"
#include "lowbit/quant_type.h"
#include "lowbit/weights.h"

namespace lowbit::cuda {

// Whether mmq runs on the current device: this build holds the sm_90a kernels and the device is
// compute capability 9.0.
bool mmq_available();
// The same for CUDA device `device` (a host-side query; false for an index that is no device).
bool mmq_available_on(int device);

// The configuration mmq runs for these sizes and arithmetic on the current device (tile, split of
// K, workspace; select_mmq_config).
MmqConfig mmq_config(QuantType t, int64_t m, int64_t n, int64_t k, MmvqMath math = MmvqMath::kAuto);

// y[M, N] = x[M, K] W^T for any M >= 1: weights decoded on chip to bf16 and multiplied on the
// tensor cores (wgmma) with the activations rounded to bf16, float32 accumulation; y in y_type.
// math kInt8 (mmq_int8_supported types): the weights' int8 codes times activations quantized per
// token and 32 weights on int8 tensor cores, each 32-weight product scaled into float32.
// x: [M, K] in x_type (row stride x_row_stride elements); y: [M, N] (row stride y_row_stride).
// The workspace (mmq_config(...).workspace_bytes(): the activations in the kernel's form plus, where K is split,
// float32 partial sums of at most kMmqMaxPartialBytes) is 256-byte aligned device memory, or
// nullptr to take it stream-ordered from the device's default pool. w.data 16-byte aligned;
// y must not overlap x. Throws where mmq_available() is false.
void mmq(QuantType t, const WeightView& w, int64_t n, int64_t k, const void* x, FloatType x_type, int64_t m,
         int64_t x_row_stride, void* y, FloatType y_type, int64_t y_row_stride, cudaStream_t stream,
         void* workspace = nullptr, size_t workspace_bytes = 0, MmvqMath math = MmvqMath::kAuto);

}  // namespace lowbit::cuda
