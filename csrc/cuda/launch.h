// Internal seam between the validated C++ API (api.cu) and the per-family kernel instantiations
// (kernels_<family>.cu): plain argument structs and one launcher template per kernel.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "lowbit/cpu.h"
#include "lowbit/cuda.h"
#include "lowbit/quant_type.h"

namespace lowbit::cuda_detail {

struct DequantArgs {
  const uint8_t* data;
  int64_t row_stride;  // bytes
  const uint8_t* scales;
  int64_t scale_row_stride;
  int64_t rows;
  int64_t k;
  void* out;
  int64_t out_row_stride;  // elements
};

struct MmvqArgs {
  const uint8_t* w;
  int64_t w_row_stride;  // bytes
  const uint8_t* scales;
  int64_t scale_row_stride;
  int64_t n;
  int64_t k;
  const void* x;
  int64_t x_row_stride;  // elements
  int m;
  void* y;
  int64_t y_row_stride;  // elements
  // int8 arithmetic: the activations quantized by the prologue kernel (workspace)
  const uint8_t* xq = nullptr;  // [M][K] int8, each 32-weight run in the format's I8Order
  const float* xs = nullptr;    // [K / 32][8] scales, zero for tokens >= M
};

// Bytes of the int8 prologue's output for M tokens: scales [K/32][8] floats, then [M][K] int8.
inline int64_t int8_activation_bytes(int64_t m, int64_t k) {
  return k + m * k;
}

template <QuantType T>
void launch_dequant(const DequantArgs& a, FloatType out_type, cudaStream_t stream);

// The dp4a MMVQ's launch shape (lane_grid).
struct LaneGrid {
  bool fits;
  unsigned blocks;
  int threads;
  int smem;
};

// Which MMVQ kernel a call runs and its launch shape (plan_mmvq): computed once per call, from
// which the caller learns whether the int8 workspace is read and which launch_mmvq then runs.
struct MmvqPlan {
  cuda::MmvqKernel kernel = cuda::MmvqKernel::kBf16TensorCores;
  LaneGrid lanes{};
  int int8_warps = 0;
  bool int8_prologue = false;  // the kernel reads the activations quantized into the workspace
};

// The plan for these sizes on the current device (`math` resolved).
template <QuantType T>
MmvqPlan plan_mmvq(int64_t n, int64_t k, int64_t m, MmvqMath math);

template <QuantType T>
void launch_mmvq(const MmvqArgs& a, FloatType act_type, const MmvqPlan& plan, cudaStream_t stream);

// Instantiates every kernel launcher of weight type Name (in a kernels_<family>.cu).
#define LOWBIT_INSTANTIATE_KERNELS(Name)                                                                 \
  template void launch_dequant<QuantType::Name>(const DequantArgs&, FloatType, cudaStream_t);            \
  template void launch_mmvq<QuantType::Name>(const MmvqArgs&, FloatType, const MmvqPlan&, cudaStream_t); \
  template MmvqPlan plan_mmvq<QuantType::Name>(int64_t, int64_t, int64_t, MmvqMath);

// Throws lowbit::Error with the CUDA error string when a launch failed.
void check_launch(const char* kernel);

// Throws like check_launch for the result of a cudaLaunchKernelEx (and clears the error state).
void launch_checked(const char* kernel, cudaError_t err);

// Whether `kernel`, as loaded on the current device, takes programmatic dependent launches: the
// device is sm_90+ and the kernel's code was compiled for PTX 9.0+ (where griddepcontrol exists).
bool kernel_has_programmatic_launch(const void* kernel);

// Shared memory of the current device (cached per device).
struct DeviceLimits {
  int shared_per_block_optin;  // bytes one block may take
  int shared_per_sm;
  int sms;  // streaming multiprocessors
};
const DeviceLimits& current_device_limits();

}  // namespace lowbit::cuda_detail
