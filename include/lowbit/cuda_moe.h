// lowbit's CUDA MoE API: routing, one projection over routed pairs (vector or batched kernel) and
// the fused layer, over raw device pointers and a cudaStream_t. No torch. Every call checks its
// arguments (lowbit::Error naming the argument), enqueues work on `stream` without synchronizing
// and allocates nothing (workspaces come from the caller), so it can be captured in a CUDA graph.
// Results are deterministic run to run: no float atomics; sums run in a fixed order.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "lowbit/cpu.h"
#include "lowbit/moe_policy.h"
#include "lowbit/moe_routing.h"
#include "lowbit/quant_type.h"
#include "lowbit/weights.h"

namespace lowbit::cuda {

// Expert ids as the caller holds them: int32 or int64, [pairs] (token-major [T, top_k] flattened).
struct ExpertIds {
  const void* data = nullptr;
  bool int64 = false;
};

// pair_experts[p] = moe_local_expert(ids[p], begin, experts) (lowbit/moe_routing.h).
void moe_pair_experts(ExpertIds ids, int64_t pairs, int64_t experts, int64_t begin, int32_t* pair_experts,
                      cudaStream_t stream);

// Device buffers of the routing (lowbit/moe_routing.h states what each holds).
struct MoeRouting {
  int32_t* sorted_pairs = nullptr;   // [capacity]
  int64_t capacity = 0;              // >= moe_sorted_capacity(pairs, experts, block_size)
  int32_t* block_experts = nullptr;  // [blocks], blocks * block_size >= capacity
  int64_t blocks = 0;
  int32_t* num_padded = nullptr;   // [1]
  int32_t* pair_slots = nullptr;   // [pairs]
  int block_size = kMoeBlockSize;  // the block_size moe_align made it with
  // moe_batched: write zeros into the rows of the pairs the routing dropped (read from pair_slots)
  // instead of leaving them unwritten
  bool zero_dropped = false;
};

// Bytes of scratch moe_align needs (pair_experts and the per-segment histograms).
size_t moe_align_workspace_bytes(int64_t pairs, int64_t experts);

// The routing on the device, equal element for element to cpu::moe_align; no host read of the ids
// (sizes are the host-known upper bounds). E <= kMoeMaxExperts; `workspace` 16-byte aligned, at
// least moe_align_workspace_bytes.
void moe_align(ExpertIds ids, int64_t pairs, int64_t experts, int64_t begin, int block_size, const MoeRouting& out,
               void* workspace, size_t workspace_bytes, cudaStream_t stream);

// One projection over routed pairs: y[p, n] = sum_k W[e(p)][n, k] x[p / x_pair_divisor, k] for
// n < N, float32 accumulation, y in y_type (F32, BF16 or F16, rounded once).
//   w: the experts' weights (data, row and expert strides in bytes; split MX scales and their
//      strides), [experts, N, row_bytes(K)].
//   x: bf16 [rows, K] with row stride x_row_stride elements (a multiple of 8), 16-byte aligned;
//      rows >= ceil(pairs / x_pair_divisor). Weights are decoded exactly; activations are bf16
//      (the vector kernel of a type with an int8 form: quantized to int8, see moe_vec).
struct MoeProjection {
  QuantType type{};
  WeightView w;
  int64_t experts = 0;
  int64_t n = 0;
  int64_t k = 0;
  const void* x = nullptr;  // bf16
  int64_t x_row_stride = 0;
  int64_t x_pair_divisor = 1;  // top_k when x holds tokens, 1 when it holds one row per pair
  int64_t pairs = 0;
  void* y = nullptr;  // [pairs, N] in y_type with row stride y_row_stride
  int64_t y_row_stride = 0;
  FloatType y_type = FloatType::F32;  // F32, BF16 or F16 (rounded once)
  // moe_batched on the grouped MMQ kernel: kInt8 multiplies the weights' int8 codes with the
  // activations quantized per token and 32 weights (types mmq_int8_supported names, routing blocks
  // of 16 .. 64), kBf16 rounds them to bf16, kAuto takes int8 where mmq_int8_by_default says so.
  // The vector kernel keeps its own rule (moe_vec_int8).
  MmvqMath math = MmvqMath::kAuto;
};

// Vector kernel: one pass over each pair's expert rows; pairs whose pair_experts[p] is outside
// [0, experts) get zero rows. Weight types with an int8 form (moe_vec_int8) multiply in int8 with
// the activation rows quantized per 32 values (lowbit/moe_policy.h states the precision): inside
// the kernel where a row fits a block's shared memory, else into `workspace` first (decided at
// launch from the device's shared memory, so the workspace is always asked for):
// workspace_bytes >= moe_vec_workspace_bytes(proj), 16-byte aligned; nullptr where that is 0.
size_t moe_vec_workspace_bytes(const MoeProjection& proj);
void moe_vec(const MoeProjection& proj, const int32_t* pair_experts, void* workspace, size_t workspace_bytes,
             cudaStream_t stream);
// The same with each pair's expert read from the router's ids inside the kernel (no
// moe_pair_experts pass): local expert ids[p] - expert_begin, zero rows where ids[p] < 0 or that
// lies outside [0, experts) (as moe_pair_experts maps them).
void moe_vec(const MoeProjection& proj, ExpertIds ids, int64_t expert_begin, void* workspace, size_t workspace_bytes,
             cudaStream_t stream);

// Batched kernel over routing made with block_size routing.block_size (any in [1, 1024]; on a
// compute capability 9.0 GPU with a build for sm_90a, 16, 32, 48, 64 and 128 run the grouped MMQ
// kernel with that token tile (48: bf16 only), the others the mma.sync kernel): rows of pairs that the routing
// dropped are not written, unless routing.zero_dropped is set: then they are written as zeros, found
// from routing.pair_slots (the grouped kernel's activation prologue writes them; no pass over the
// whole output).
// Blocks past *num_padded exit at once.
//   workspace: 256-byte aligned, moe_batched_workspace_bytes(proj, routing.block_size) bytes (the
//   activations in the grouped kernel's order); null: a stream-ordered allocation of its own.
void moe_batched(const MoeProjection& proj, const MoeRouting& routing, cudaStream_t stream, void* workspace = nullptr,
                 size_t workspace_bytes = 0);

// Bytes of moe_batched's workspace on the current device (0 where the mma.sync kernel runs);
// a function of the shapes alone.
size_t moe_batched_workspace_bytes(const MoeProjection& proj, int block_size);

// The fused layer: routing, gate/up projection with act(gate) * up, down projection, and the
// top-k weighted sum in a fixed order (out[t] = sum over k in order of w[t, k] * y[t * top_k + k]
// for the pairs whose expert is local; exact zeros where none is).
//   x: [tokens, H] (row stride x_row_stride elements, 16-byte aligned) in x_type; out [tokens, H]
//   contiguous in x_type; topk_weights float32 [tokens, top_k]; ids [tokens, top_k].
//   plan: plan_moe for this shape (its kernel and workspace layout); workspace: device memory of
//   plan.workspace.total bytes, 256-byte aligned.
void fused_moe(const cpu::MoeLayer& layer, const void* x, FloatType x_type, int64_t tokens, int64_t x_row_stride,
               const float* topk_weights, ExpertIds ids, int64_t top_k, void* out, const MoePlan& plan, void* workspace,
               size_t workspace_bytes, cudaStream_t stream);

}  // namespace lowbit::cuda
