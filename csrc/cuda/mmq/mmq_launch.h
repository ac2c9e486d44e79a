// Seam between the MMQ API (mmq_api.cu, every architecture) and its Hopper kernels
// (mmq_<family>.cu, compiled for sm_90a alone): the argument struct and one launcher per type.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "lowbit/cpu.h"
#include "lowbit/mmq_policy.h"
#include "lowbit/quant_type.h"
#include "lowbit/weights.h"

namespace lowbit::cuda_detail {

struct MmqArgs {
  const uint8_t* w;
  int64_t w_row_stride;  // bytes
  const uint8_t* scales;
  int64_t scale_row_stride;
  int64_t n;
  int64_t k;
  const void* x;  // [M, K] in x_type, row stride x_row_stride elements
  int64_t x_row_stride;
  FloatType x_type;
  int64_t m;
  void* y;  // [M, N] in y_type
  int64_t y_row_stride;
  FloatType y_type;
  // workspace: the activations as bf16 in the kernel's K order, [M, k_pad] (k_pad = K rounded up
  // to 256, zeros past K), then with splits > 1 the float32 partial sums [splits, M, N]
  uint8_t* workspace;
  // The grouped MoE kernel's prologue only (null elsewhere): the routing's pair slots; row r's
  // pairs r * zero_divisor .. (below zero_pairs) that it dropped get zeros in y's first n columns.
  const int32_t* zero_slots = nullptr;
  int64_t zero_pairs = 0;
  int64_t zero_divisor = 1;
};

// Launches the permutation prologue, the tile kernel and (split K) the reduction on `stream`.
template <QuantType T>
void launch_mmq(const MmqArgs& a, const MmqConfig& config, cudaStream_t stream);

// Runs a plan's MMQ configuration (checked like lowbit::cuda::mmq, without planning again); the
// output in the activations' type (mmq_api.cu).
void run_mmq_plan(QuantType t, const WeightView& w, int64_t n, int64_t k, const void* x, FloatType x_type, int64_t m,
                  int64_t x_row_stride, void* y, int64_t y_row_stride, const MmqConfig& config, void* workspace,
                  size_t workspace_bytes, cudaStream_t stream);

#define LOWBIT_INSTANTIATE_MMQ(Name) \
  template void launch_mmq<QuantType::Name>(const MmqArgs&, const MmqConfig&, cudaStream_t);

}  // namespace lowbit::cuda_detail
