// The seam between the C++ API (api/api.cu) and the MMVQ instantiations (instances/): the
// argument struct the kernels take and the per-type launcher, which runs the kernel a plan names.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "lowbit/cpu.h"
#include "lowbit/plan.h"
#include "lowbit/quant_type.h"

namespace lowbit::cuda_detail {

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

// Runs the pass `config` (plan_mmvq_pass for these arguments on this device) describes.
template <QuantType T>
void launch_mmvq(const MmvqArgs& a, FloatType act_type, const MmvqConfig& config, cudaStream_t stream);

}  // namespace lowbit::cuda_detail
