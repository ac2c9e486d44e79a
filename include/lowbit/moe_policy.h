// The MoE dispatcher's policy: vector or batched kernel by pairs per local expert, the tile the batched
// kernel's routing pads each expert to, and the workspace a fused layer needs. Pure C++ (no CUDA,
// no torch), so that servers, tests and the torch op size buffers from the same numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "lowbit/dispatch.h"
#include "lowbit/quant_type.h"

namespace lowbit {

enum class MoeKernel : int32_t {
  kVector = 0,   // one pass per (token, k) pair over its expert's rows: few tokens
  kBatched = 1,  // pairs grouped per expert, bf16 tensor-core tiles over decoded weight tiles
};

const char* moe_kernel_name(MoeKernel k);  // "moe_vec", "moe_batched"
// "moe_vec" or "moe_batched"; throws lowbit::Error naming `arg` otherwise ("auto" is not a kernel).
MoeKernel parse_moe_kernel(const std::string& name, const char* arg = "kernel");

// Rows of sorted pairs per routing block where no other is chosen (the mma.sync batched kernel's
// tile, and moe_align's default): the routing pads each expert's pairs to a multiple.
inline constexpr int kMoeBlockSize = 64;
// Largest E and top_k the kernels take (routing histograms live in shared memory).
inline constexpr int64_t kMoeMaxExperts = 512;
inline constexpr int64_t kMoeMaxTopK = 16;

// The sizes of one MoE layer call.
struct MoeShape {
  bool operator==(const MoeShape& o) const {
    return w13_type == o.w13_type && w2_type == o.w2_type && tokens == o.tokens && experts == o.experts &&
           top_k == o.top_k && hidden == o.hidden && intermediate == o.intermediate;
  }
  QuantType w13_type{};
  QuantType w2_type{};
  int64_t tokens = 0;
  int64_t experts = 0;  // E held locally
  int64_t top_k = 0;
  int64_t hidden = 0;        // H
  int64_t intermediate = 0;  // I
};

// Where each buffer of the fused layer's workspace starts (bytes from its 256-byte aligned base);
// a buffer the chosen kernel does not use has size 0.
struct MoeWorkspaceLayout {
  size_t pair_experts = 0;    // int32 [pairs], batched: local expert of each (token, k) pair, -1 if dropped
  size_t sorted_pairs = 0;    // int32 [sorted_capacity]: pair ids grouped by expert, padded
  size_t block_experts = 0;   // int32 [blocks]: the expert of each block of kMoeBlockSize sorted rows
  size_t num_padded = 0;      // int32 [1]: rows of sorted_pairs in use (a multiple of the block size)
  size_t pair_slots = 0;      // int32 [pairs]: where each pair sits in sorted_pairs, -1 if dropped
  size_t segment_counts = 0;  // int32 [segments, E]: the routing's per-segment histograms
  size_t x_bf16 = 0;          // bf16 [tokens, H]: the activations rounded once (when x is not bf16)
  size_t x_mmq = 0;           // bf16 [max(tokens, pairs), K padded]: a projection's x in MMQ order
  size_t gated = 0;           // bf16 [pairs, I]: act(gate) * up
  size_t down = 0;            // float32 [pairs, H]: each pair's down projection before the combine
  // vector kernel, types with an int8 form (moe_vec_activation_bytes):
  size_t x_int8 = 0;      // the gate/up projection's activations quantized to int8 (tokens rows of H)
  size_t gated_int8 = 0;  // the down projection's: act(gate) * up quantized to int8 (pairs rows of I)
  size_t total = 0;
};

struct MoePlan {
  MoeShape shape;          // what it was planned for: a call of another shape is rejected
  bool x_is_bf16 = false;  // planned without the activations' rounding copy
  MoeKernel kernel = MoeKernel::kVector;
  bool grouped_mmq = false;  // batched projections on the grouped MMQ kernel (Hopper)
  int block_size = kMoeBlockSize;
  int64_t pairs = 0;            // tokens * top_k
  int64_t sorted_capacity = 0;  // pairs + E * (block_size - 1): an upper bound known on the host
  int64_t blocks = 0;           // sorted_capacity / block_size, rounded up
  int64_t segments = 0;         // routing segments of kMoeRoutingSegment pairs
  MoeWorkspaceLayout workspace;
  std::string reason;  // why this kernel, in one sentence
};

// Pairs one routing block ranks (its histogram is per segment).
inline constexpr int kMoeRoutingSegment = 256;

// Largest token count the vector kernel serves in `plan_moe`'s automatic choice for the shape's local
// experts and top_k on this device: where a tuning row was measured (csrc/cuda/tuning/), the tokens
// whose pairs stay below its pairs per local expert; a provisional token count elsewhere.
int64_t moe_vector_max_tokens(const MoeShape& shape, const DeviceFacts& device);

// The routing block size of the batched kernel for `pairs` pairs over E experts on `device`: where
// the grouped MMQ kernel runs, its smallest token tile (16, 32, 48, 64, 128) that holds 1.5x an average
// expert's pairs (so that most experts take one block: the weight decode, not the padded math,
// bounds the kernel); else kMoeBlockSize. Provisional until measured (bench_moe.py moe_proj).
int moe_block_size(int64_t pairs, int64_t experts, const DeviceFacts& device);
// Whether the batched kernel (moe_batched with math kAuto, the fused layer's batched path) runs
// type t's routing blocks of block_size on the grouped MMQ's int8 path on `device`: where the
// grouped MMQ kernel runs that tile and mmq_int8_by_default (lowbit/mmq_policy.h) says so.
bool moe_batched_int8(QuantType t, int block_size, const DeviceFacts& device);
// Whether the vector kernel multiplies in int8 for weight type t: every type with an int8 form (all
// but MXFP8) runs an int8 MMVQ over the routed pairs, with the activations quantized per row and
// 32 values to int8 (scale amax / 127, round to nearest even: MmvqMath::kInt8's precision): the
// dp4a lane kernel quantizes them inside each block, and where a row does not fit a block's shared
// memory the tensor-core kernel's prologue quantizes them into a workspace first; MXFP8 multiplies
// in float32 with the bf16 activations.
bool moe_vec_int8(QuantType t);
// Bytes of that workspace for `rows` activation rows of K values (0 where t has no int8 form):
// rows of x for a projection (ceil(pairs / x_pair_divisor)), 16-byte aligned.
size_t moe_vec_activation_bytes(QuantType t, int64_t rows, int64_t k);

// Sorted-rows capacity, blocks and segments of the routing for `pairs` pairs over E experts.
int64_t moe_sorted_capacity(int64_t pairs, int64_t experts, int block_size = kMoeBlockSize);

// The plan of a fused MoE call; `force` (optional) overrides the kernel choice. x_is_bf16: the
// activations are bf16 already (no rounding copy). Throws lowbit::Error naming the argument for
// shapes out of range (E > kMoeMaxExperts, top_k > kMoeMaxTopK, negative sizes, bad types).
MoePlan plan_moe(const MoeShape& shape, bool x_is_bf16, const DeviceFacts& device, const MoeKernel* force = nullptr);

}  // namespace lowbit
