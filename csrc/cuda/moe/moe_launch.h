// Internal seam between the checked MoE API (moe_api.cu) and the per-family projection kernels
// (moe_kernels_<family>.cu): one argument struct and one launcher per kernel and weight type.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/common/activation.cuh"
#include "cuda/common/pair_experts.h"
#include "lowbit/cpu.h"
#include "lowbit/quant_type.h"

namespace lowbit::cuda_detail {

// One projection over routed pairs (lowbit/cuda_moe.h, MoeProjection) in kernel terms.
// gated: the weight holds 2 * n rows (gate rows, then up rows) and the output is the bf16
// act(gate_j . x) * (up_j . x) for j < n; otherwise row_j . x in out_type.
struct MoeProjArgs {
  const uint8_t* w;
  int64_t w_row_stride;     // bytes
  int64_t w_expert_stride;  // bytes
  const uint8_t* scales;    // split MX types
  int64_t scale_row_stride;
  int64_t scale_expert_stride;
  int64_t experts;
  int64_t n;  // outputs per pair
  int64_t k;
  const uint16_t* x;  // bf16 bits
  int64_t x_row_stride;
  int64_t x_pair_divisor;
  int64_t pairs;
  PairExperts pair_experts;     // vector kernel and combine: each pair's local expert
  const int32_t* sorted_pairs;  // batched kernel: routing
  int64_t sorted_capacity;
  const int32_t* block_experts;
  const int32_t* num_padded;
  int block_size;  // batched kernels: sorted rows per routing block
  // vector kernel of a type with an int8 form: the activations quantized to int8
  // (moe_vec_activation_bytes for ceil(pairs / x_pair_divisor) rows)
  uint8_t* int8_activations;
  bool batched_int8;  // grouped MMQ kernel: the int8 path (MoeProjection::math)
  void* out;          // out_type, or bf16 bits when gated
  int64_t out_row_stride;
  FloatType out_type;  // plain outputs: F32, BF16 or F16
  bool gated;
  Activation activation;
  // batched kernels: where set, the rows of pairs whose slot is -1 (dropped by the routing) are
  // written as zeros (moe_batched with MoeRouting::zero_dropped)
  const int32_t* zero_slots = nullptr;
};

// The type of a projection's outputs: bf16 when gated, else out_type.
inline FloatType out_float_type(const MoeProjArgs& a) {
  return a.gated ? FloatType::BF16 : a.out_type;
}

// The float32 vector kernel's outputs per block (plain; gated takes half as many): the weight types
// without an int8 form (the others run an MMVQ's pairs mode: moe_vec_kernel.cuh).
inline constexpr int kMoeVecWarps = 4;
inline constexpr int kMoeVecRowsPerWarp = 2;
// The batched kernel's tile: kMoeTileM sorted rows (the routing's block) x kMoeTileN weight rows.
inline constexpr int kMoeTileM = 64;
inline constexpr int kMoeTileN = 64;
inline constexpr int kMoeTileK = 64;

// Blocks of the mma.sync batched kernel per routing block of `block_size` sorted rows.
__host__ __device__ inline int moe_batched_tiles_per_block(int block_size) {
  return (block_size + kMoeTileM - 1) / kMoeTileM;
}

template <QuantType T>
void launch_moe_vec(const MoeProjArgs& a, cudaStream_t stream);

template <QuantType T>
void launch_moe_batched(const MoeProjArgs& a, cudaStream_t stream);

#define LOWBIT_INSTANTIATE_MOE_KERNELS(Name)                                       \
  template void launch_moe_vec<QuantType::Name>(const MoeProjArgs&, cudaStream_t); \
  template void launch_moe_batched<QuantType::Name>(const MoeProjArgs&, cudaStream_t);

}  // namespace lowbit::cuda_detail
