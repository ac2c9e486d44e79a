// The seam between the C++ API (api/api.cu) and the MMVQ instantiations (instances/): the
// argument struct the kernels take and the per-type launcher, which runs the kernel a plan names.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/common/int8_activation_layout.h"
#include "cuda/common/pair_experts.h"
#include "lowbit/cpu.h"
#include "lowbit/plan.h"
#include "lowbit/quant_type.h"

namespace lowbit::cuda_detail {

// Pairs mode of the MMVQ kernels (the MoE vector projection): one launch over routed
// (row of x, expert) pairs, pair p taking the activations of row p / x_pair_divisor, its expert's
// rows and output row p of y. gated: the expert holds 2n' rows (n' gate rows, then n' up rows;
// MmvqArgs::n = 2n') and y is bf16 act(gate . x) * (up . x) [pairs][n']; otherwise y is in
// out_type (float32, bf16 or fp16, rounded once).
// The int8 tensor-core kernel takes a block per (pair, row tile) (mmvq_pairs.cuh), the dp4a lane
// kernel a run of items_per_block (pair, row group) items per block (lane_pairs.cuh).
struct MmvqPairs {
  PairExperts experts;
  int64_t count = 0;
  int64_t expert_count = 0;     // the experts in w (the lane kernel's tensor map)
  int64_t w_expert_stride = 0;  // bytes
  int64_t scale_expert_stride = 0;
  int64_t x_pair_divisor = 1;
  int64_t items_per_block = 0;          // lane kernel
  FloatType out_type = FloatType::F32;  // plain outputs (gated: bf16)
  bool gated = false;
  Activation activation = Activation::kSiLU;
};

// Which rows and outputs a block of the int8 kernel takes: a dense tile of 16 rows, or a tile of a
// routed pair (MmvqPairs), plain or gated.
enum class MmvqMode : int { kDense, kPairs, kGatedPairs };

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
  // (int8_activation_layout.h)
  const uint8_t* xq = nullptr;  // [M][K] int8, each 32-weight run in the format's I8Order
  const float* xs = nullptr;    // [ceil(M / 8)][K / 32][8] scales, zero for rows >= M
};

// The pairs mode's arguments. Apart from MmvqArgs, not a member of it: a larger parameter struct
// costs the dense kernels registers (the bf16 MMVQ at two tokens spilled 20-60 bytes with it).
struct MmvqPairArgs : MmvqArgs {
  MmvqPairs pairs;
};

// Runs the pass `config` (plan_mmvq_pass for these arguments on this device) describes.
template <QuantType T>
void launch_mmvq(const MmvqArgs& a, FloatType act_type, const MmvqConfig& config, cudaStream_t stream);

}  // namespace lowbit::cuda_detail
