// lowbit's CUDA MoE API (include/lowbit/cuda_moe.h): argument checks, then the routing, the
// projection kernels of each weight type and the fused layer's sequence on one stream.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/api/api_support.h"
#include "cuda/common/launch.h"
#include "cuda/mmq/mmq_grouped_launch.h"
#include "cuda/mmvq/mmvq_pairs.cuh"
#include "cuda/moe/moe_launch.h"
#include "cuda/moe/moe_routing_launch.h"
#include "lowbit/cuda.h"
#include "lowbit/cuda_mmq.h"
#include "lowbit/cuda_moe.h"
#include "lowbit/error.h"
#include "lowbit/formats/all.h"

namespace lowbit::cuda {
namespace {

bool aligned(const void* p, uintptr_t a) {
  return (reinterpret_cast<uintptr_t>(p) % a) == 0;
}

constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;

void check_experts(int64_t pairs, int64_t experts) {
  LOWBIT_CHECK(experts >= 1 && experts <= kMoeMaxExperts, "experts: E = ", experts, " must be in [1, ", kMoeMaxExperts,
               "]");
  LOWBIT_CHECK(pairs >= 0, "topk_ids: pairs must be >= 0, got ", pairs);
}

// The weight of every expert: type, strides and alignment as the decode primitives need them.
void check_expert_weight(QuantType t, const WeightView& w, int64_t experts, int64_t rows, int64_t k, const char* name) {
  const TypeInfo& info = weight_type_info(static_cast<int64_t>(t), "qtype");
  const int64_t rb = row_bytes(t, k, "k");
  LOWBIT_CHECK(rows >= 1, name, ": rows per expert must be >= 1, got ", rows);
  LOWBIT_CHECK(w.data != nullptr, name, ": data pointer is null");
  LOWBIT_CHECK(aligned(w.data, 16), name, ": data must be 16-byte aligned");
  int block_align = 1;
  visit_weight_type(t, [&](auto traits) { block_align = decltype(traits)::kAlign; });
  LOWBIT_CHECK(w.row_stride >= rb && w.row_stride % block_align == 0, name, ": row stride ", w.row_stride,
               " must be >= the row's ", rb, " bytes and a multiple of ", block_align, " (", info.name, ")");
  LOWBIT_CHECK(experts <= 1 || (w.expert_stride >= rows * w.row_stride && w.expert_stride % block_align == 0), name,
               ": expert stride ", w.expert_stride, " must be >= rows * row stride = ", rows * w.row_stride,
               " and a multiple of ", block_align);
  if (info.split_scales) {
    LOWBIT_CHECK(w.scales != nullptr, name, ": ", info.name, " needs its E8M0 scales, which are missing");
    LOWBIT_CHECK(w.scale_row_stride >= k / 32, name, ": scale row stride ", w.scale_row_stride,
                 " is shorter than K/32 = ", k / 32);
    LOWBIT_CHECK(experts <= 1 || w.scale_expert_stride >= rows * w.scale_row_stride, name, ": scale expert stride ",
                 w.scale_expert_stride, " must be >= rows * scale row stride");
  }
}

cuda_detail::MoeProjArgs proj_args(const MoeProjection& p, bool gated, Activation act) {
  cuda_detail::MoeProjArgs a{};
  a.w = static_cast<const uint8_t*>(p.w.data);
  a.w_row_stride = p.w.row_stride;
  a.w_expert_stride = p.w.expert_stride;
  a.scales = p.w.scales;
  a.scale_row_stride = p.w.scale_row_stride;
  a.scale_expert_stride = p.w.scale_expert_stride;
  a.experts = p.experts;
  a.n = p.n;
  a.k = p.k;
  a.x = static_cast<const uint16_t*>(p.x);
  a.x_row_stride = p.x_row_stride;
  a.x_pair_divisor = p.x_pair_divisor;
  a.pairs = p.pairs;
  a.out = p.y;
  a.out_type = p.y_type;
  a.out_row_stride = p.y_row_stride;
  a.gated = gated;
  a.activation = act;
  return a;
}

// rows: weight rows per expert (2n when gated).
void check_projection(const MoeProjection& p, int64_t rows, const char* op) {
  check_experts(p.pairs, p.experts);
  LOWBIT_CHECK(p.n >= 1, op, ": N must be >= 1, got ", p.n);
  check_expert_weight(p.type, p.w, p.experts, rows, p.k, "w");
  LOWBIT_CHECK(p.x_pair_divisor >= 1, "x_pair_divisor: must be >= 1, got ", p.x_pair_divisor);
  LOWBIT_CHECK(p.pairs == 0 || p.x != nullptr, "x: pointer is null");
  LOWBIT_CHECK(aligned(p.x, 16), "x: must be 16-byte aligned (bf16 rows are read 16 bytes at a time)");
  LOWBIT_CHECK(p.x_row_stride >= p.k && p.x_row_stride % 8 == 0, "x: row stride ", p.x_row_stride,
               " must be >= K = ", p.k, " and a multiple of 8 elements");
  LOWBIT_CHECK(p.pairs == 0 || p.y != nullptr, "y: pointer is null");
  LOWBIT_CHECK(aligned(p.y, p.y_type == FloatType::F32 ? 4 : 2), "y: must be aligned to its element (",
               p.y_type == FloatType::F32 ? 4 : 2, " bytes)");
  LOWBIT_CHECK(p.y_row_stride >= p.n, "y: row stride ", p.y_row_stride, " must be >= N = ", p.n);
}

// mmq_workspace: non-null where a batched projection runs on the grouped MMQ kernel (sm_90a).
void launch_projection(QuantType t, const cuda_detail::MoeProjArgs& a, bool batched, cudaStream_t stream,
                       uint8_t* mmq_workspace = nullptr) {
  visit_weight_type(t, [&](auto traits) {
    constexpr QuantType kT = decltype(traits)::kType;
    if (batched && mmq_workspace != nullptr) {
#if defined(LOWBIT_WITH_SM90A)
      cuda_detail::launch_moe_grouped_mmq<kT>(a, mmq_workspace, stream);
#else
      detail::fail("moe_batched: this build has no sm_90a kernels");
#endif
    } else if (batched) {
      if (a.zero_slots != nullptr)
        cuda_detail::launch_zero_dropped_rows(a.zero_slots, a.pairs, a.out, cuda_detail::out_float_type(a),
                                              a.out_row_stride, a.n, stream);
      cuda_detail::launch_moe_batched<kT>(a, stream);
    } else {
      cuda_detail::launch_moe_vec<kT>(a, stream);
    }
  });
}

// Whether a batched projection with this routing block size runs on the grouped MMQ kernel here.
bool grouped_mmq_runs(int block_size) {
  return cuda_detail::moe_grouped_mmq_block(block_size) && mmq_available();
}

// Outputs per block of the vector path for type t: the int8 MMVQ's pairs tile, or the float kernel's.
void check_vec_grid(QuantType t, int64_t pairs, int64_t n, bool gated) {
  const int64_t per_block = moe_vec_int8(t) ? cuda_detail::pair_tile_outputs(gated)
                            : gated         ? cuda_detail::kMoeVecWarps
                                            : cuda_detail::kMoeVecWarps * cuda_detail::kMoeVecRowsPerWarp;
  LOWBIT_CHECK(pairs * ((n + per_block - 1) / per_block) <= kMaxGridX, "topk_ids: ", pairs, " pairs x ", n,
               " outputs exceed the vector kernel's grid; use the batched kernel");
}

// Both batched kernels: row tiles on y (the mma.sync kernel's are the smaller), routing blocks on x.
void check_batched_grid(int64_t capacity, int64_t n, bool gated, int block_size) {
  const int64_t per_tile = gated ? cuda_detail::kMoeTileN / 2 : cuda_detail::kMoeTileN;
  LOWBIT_CHECK((n + per_tile - 1) / per_tile <= 65535, "w: N = ", n, " needs more than 65535 tiles of ", per_tile);
  LOWBIT_CHECK(
      (capacity + block_size - 1) / block_size * cuda_detail::moe_batched_tiles_per_block(block_size) < kMaxGridX,
      "sorted_pairs: too many rows");
}

void check_routing(const MoeRouting& r, int64_t pairs, int64_t experts, int block_size) {
  LOWBIT_CHECK(r.sorted_pairs != nullptr && r.block_experts != nullptr && r.num_padded != nullptr,
               "routing: sorted_pairs, block_experts and num_padded must not be null");
  LOWBIT_CHECK(r.capacity >= moe_sorted_capacity(pairs, experts, block_size), "sorted_pairs: ", r.capacity,
               " rows is less than pairs + E * (block_size - 1) = ", moe_sorted_capacity(pairs, experts, block_size));
  LOWBIT_CHECK(r.blocks * block_size >= r.capacity, "block_experts: ", r.blocks, " blocks of ", block_size,
               " do not cover the ", r.capacity, " sorted rows");
}

}  // namespace

void moe_pair_experts(ExpertIds ids, int64_t pairs, int64_t experts, int64_t begin, int32_t* pair_experts,
                      cudaStream_t stream) {
  check_experts(pairs, experts);
  LOWBIT_CHECK(pairs == 0 || (ids.data != nullptr && pair_experts != nullptr), "topk_ids/pair_experts: null pointer");
  cuda_detail::launch_pair_experts({ids.data, ids.int64, begin, experts}, pairs, pair_experts, stream);
}

size_t moe_align_workspace_bytes(int64_t pairs, int64_t experts) {
  const int64_t segments = (pairs + kMoeRoutingSegment - 1) / kMoeRoutingSegment;
  const auto pair_bytes = static_cast<size_t>((pairs * 4 + 255) / 256 * 256);
  return pair_bytes + static_cast<size_t>(segments * experts * 4);
}

void moe_align(ExpertIds ids, int64_t pairs, int64_t experts, int64_t begin, int block_size, const MoeRouting& out,
               void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  check_experts(pairs, experts);
  LOWBIT_CHECK(block_size >= 1 && block_size <= 1024, "block_size: must be in [1, 1024], got ", block_size);
  LOWBIT_CHECK(pairs < (int64_t{1} << 31) - experts * block_size, "topk_ids: ", pairs,
               " pairs do not fit int32 sorted rows");
  check_routing(out, pairs, experts, block_size);
  LOWBIT_CHECK(pairs == 0 || (ids.data != nullptr && out.pair_slots != nullptr), "topk_ids/pair_slots: null pointer");
  const size_t need = moe_align_workspace_bytes(pairs, experts);
  LOWBIT_CHECK(workspace != nullptr && workspace_bytes >= need && aligned(workspace, 16),
               "workspace: ", workspace_bytes, " bytes; moe_align needs ", need, ", 16-byte aligned");
  auto* pair_experts = static_cast<int32_t*>(workspace);
  auto* counts = reinterpret_cast<int32_t*>(static_cast<uint8_t*>(workspace) + (pairs * 4 + 255) / 256 * 256);
  cuda_detail::launch_moe_routing({ids.data, ids.int64, begin, experts}, pairs, block_size, pair_experts, counts,
                                  out.sorted_pairs, out.capacity, out.block_experts, out.blocks, out.num_padded,
                                  out.pair_slots, stream);
}

size_t moe_vec_workspace_bytes(const MoeProjection& proj) {
  LOWBIT_CHECK(proj.pairs >= 0 && proj.x_pair_divisor >= 1, "topk_ids: pairs (", proj.pairs,
               ") must be >= 0 and x_pair_divisor (", proj.x_pair_divisor, ") >= 1");
  return moe_vec_activation_bytes(proj.type, (proj.pairs + proj.x_pair_divisor - 1) / proj.x_pair_divisor, proj.k);
}

namespace {

void run_moe_vec(const MoeProjection& proj, const cuda_detail::PairExperts& experts, void* workspace,
                 size_t workspace_bytes, cudaStream_t stream) {
  check_projection(proj, proj.n, "moe_vec");
  LOWBIT_CHECK(proj.y_type == FloatType::F32 || proj.y_type == FloatType::BF16 || proj.y_type == FloatType::F16,
               "y_type: must be F32, BF16 or F16, got ", static_cast<int>(proj.y_type));
  check_vec_grid(proj.type, proj.pairs, proj.n, false);
  const size_t need = moe_vec_workspace_bytes(proj);
  LOWBIT_CHECK(need == 0 || (workspace != nullptr && workspace_bytes >= need && aligned(workspace, 16)),
               "workspace: ", workspace_bytes, " bytes; moe_vec needs ", need,
               " (moe_vec_workspace_bytes), 16-byte aligned");
  cuda_detail::MoeProjArgs a = proj_args(proj, false, Activation::kSiLU);
  a.pair_experts = experts;
  a.int8_activations = static_cast<uint8_t*>(workspace);
  launch_projection(proj.type, a, false, stream);
}

}  // namespace

void moe_vec(const MoeProjection& proj, const int32_t* pair_experts, void* workspace, size_t workspace_bytes,
             cudaStream_t stream) {
  LOWBIT_CHECK(proj.pairs == 0 || pair_experts != nullptr, "pair_experts: pointer is null");
  run_moe_vec(proj, {pair_experts, false, 0, proj.experts}, workspace, workspace_bytes, stream);
}

void moe_vec(const MoeProjection& proj, ExpertIds ids, int64_t expert_begin, void* workspace, size_t workspace_bytes,
             cudaStream_t stream) {
  LOWBIT_CHECK(proj.pairs == 0 || ids.data != nullptr, "topk_ids: pointer is null");
  run_moe_vec(proj, {ids.data, ids.int64, expert_begin, proj.experts}, workspace, workspace_bytes, stream);
}

size_t moe_batched_workspace_bytes(const MoeProjection& proj, int block_size) {
  if (!grouped_mmq_runs(block_size)) return 0;
  LOWBIT_CHECK(proj.pairs >= 0 && proj.x_pair_divisor >= 1 && proj.k >= 0,
               "proj: pairs, x_pair_divisor and K must be non-negative (x_pair_divisor >= 1)");
  return static_cast<size_t>(cuda_detail::moe_grouped_mmq_workspace_bytes(proj.pairs, proj.x_pair_divisor, proj.k));
}

void moe_batched(const MoeProjection& proj, const MoeRouting& routing, cudaStream_t stream, void* workspace,
                 size_t workspace_bytes) {
  check_projection(proj, proj.n, "moe_batched");
  LOWBIT_CHECK(proj.y_type == FloatType::F32 || proj.y_type == FloatType::BF16 || proj.y_type == FloatType::F16,
               "y_type: must be F32, BF16 or F16, got ", static_cast<int>(proj.y_type));
  LOWBIT_CHECK(routing.block_size >= 1 && routing.block_size <= 1024, "routing: block_size must be in [1, 1024], got ",
               routing.block_size);
  check_routing(routing, proj.pairs, proj.experts, routing.block_size);
  check_batched_grid(routing.capacity, proj.n, false, routing.block_size);
  const size_t need = moe_batched_workspace_bytes(proj, routing.block_size);
  LOWBIT_CHECK(workspace == nullptr || (workspace_bytes >= need && aligned(workspace, 256)),
               "workspace: ", workspace_bytes, " bytes; moe_batched needs ", need, ", 256-byte aligned");
  cuda_detail::MoeProjArgs a = proj_args(proj, false, Activation::kSiLU);
  a.sorted_pairs = routing.sorted_pairs;
  a.sorted_capacity = routing.capacity;
  a.block_experts = routing.block_experts;
  a.num_padded = routing.num_padded;
  a.block_size = routing.block_size;
  LOWBIT_CHECK(!routing.zero_dropped || routing.pair_slots != nullptr,
               "routing.zero_dropped: the dropped pairs are read from routing.pair_slots, which is null");
  LOWBIT_CHECK(!routing.zero_dropped || proj.pairs < (int64_t{1} << 31), "routing.pair_slots: ", proj.pairs,
               " pairs do not fit its int32 slots");
  a.zero_slots = routing.zero_dropped ? routing.pair_slots : nullptr;
  check_mmq_math(proj.type, proj.math, "moe_batched (proj.math)");
  a.batched_int8 = proj.math == MmvqMath::kInt8 ||
                   (proj.math == MmvqMath::kAuto && moe_batched_int8(proj.type, routing.block_size, device_facts()));
  // a device fact and the block size, not the workspace (which is 0 without pairs)
  const bool grouped = grouped_mmq_runs(routing.block_size);
  LOWBIT_CHECK(!a.batched_int8 || (grouped && cuda_detail::mmq_int8_token_tile(routing.block_size)),
               "math (proj.math): int8 runs on the grouped MMQ kernel (sm_90a) with routing blocks of 16, 32 or 64; ",
               "got ", routing.block_size, grouped ? "" : " on a device without it");
  if (proj.pairs == 0) return;
  cuda_detail::StreamOrderedBuffer owned{nullptr, stream};
  uint8_t* mmq_workspace = nullptr;
  if (need > 0)
    mmq_workspace =
        static_cast<uint8_t*>(cuda_detail::workspace_or_allocate(workspace, need, owned, stream, "moe_batched"));
  launch_projection(proj.type, a, true, stream, mmq_workspace);
}

void fused_moe(const cpu::MoeLayer& layer, const void* x, FloatType x_type, int64_t tokens, int64_t x_row_stride,
               const float* topk_weights, ExpertIds ids, int64_t top_k, void* out, const MoePlan& plan, void* workspace,
               size_t workspace_bytes, cudaStream_t stream) {
  const int64_t E = layer.local_experts, H = layer.hidden, I = layer.intermediate;
  check_experts(tokens * top_k, E);
  LOWBIT_CHECK(tokens >= 0, "x: token count must be >= 0, got ", tokens);
  LOWBIT_CHECK(top_k >= 1 && top_k <= kMoeMaxTopK, "topk_ids: top_k = ", top_k, " must be in [1, ", kMoeMaxTopK, "]");
  LOWBIT_CHECK(H >= 1 && I >= 1, "w13/w2: H = ", H, " and I = ", I, " must be positive");
  check_expert_weight(layer.w13_type, layer.w13, E, 2 * I, H, "w13");
  check_expert_weight(layer.w2_type, layer.w2, E, H, I, "w2");
  LOWBIT_CHECK(layer.activation == Activation::kSiLU || layer.activation == Activation::kGELU ||
                   layer.activation == Activation::kGELUTanh,
               "activation: unknown value ", static_cast<int>(layer.activation));
  const int64_t pairs = tokens * top_k;
  // the plan's buffers are sized for its shape: a call of another shape would write past them
  const MoeShape shape{layer.w13_type, layer.w2_type, tokens, E, top_k, H, I};
  LOWBIT_CHECK(plan.shape == shape && plan.pairs == pairs && plan.block_size >= 1 && plan.block_size <= 1024 &&
                   plan.sorted_capacity >= moe_sorted_capacity(pairs, E, plan.block_size) &&
                   plan.blocks * plan.block_size >= plan.sorted_capacity,
               "plan: made for another shape (", plan.shape.tokens, " tokens, E = ", plan.shape.experts,
               ", top_k = ", plan.shape.top_k, ", H = ", plan.shape.hidden, ", I = ", plan.shape.intermediate,
               "); use plan_moe with this call's shape");
  LOWBIT_CHECK(workspace_bytes >= plan.workspace.total && workspace != nullptr && aligned(workspace, 256),
               "workspace: ", workspace_bytes, " bytes; the plan needs ", plan.workspace.total, ", 256-byte aligned");
  LOWBIT_CHECK(tokens == 0 || (x != nullptr && out != nullptr && topk_weights != nullptr && ids.data != nullptr),
               "x/out/topk_weights/topk_ids: null pointer");
  LOWBIT_CHECK(x_row_stride >= H, "x: row stride ", x_row_stride, " must be >= H = ", H);
  const bool x_bf16 = x_type == FloatType::BF16 && aligned(x, 16) && x_row_stride % 8 == 0;
  LOWBIT_CHECK(x_bf16 || !plan.x_is_bf16,
               "plan: made for bf16 activations (16-byte aligned, row stride a multiple of 8); this x needs the "
               "rounding copy (plan_moe with x_is_bf16 = false)");
  const bool batched = plan.kernel == MoeKernel::kBatched;
  LOWBIT_CHECK(!plan.grouped_mmq || (batched && grouped_mmq_runs(plan.block_size)),
               "plan: made for the grouped MMQ kernel (a compute capability 9.0 GPU, a build for sm_90a, token "
               "tiles 16 .. 128), which does not run here; plan_moe with this device's facts");
  if (batched) {
    check_batched_grid(plan.sorted_capacity, I, true, plan.block_size);
    check_batched_grid(plan.sorted_capacity, H, false, plan.block_size);
  } else {
    check_vec_grid(layer.w13_type, pairs, I, true);
    check_vec_grid(layer.w2_type, pairs, H, false);
  }
  if (tokens == 0) return;

  uint8_t* base = static_cast<uint8_t*>(workspace);
  const MoeWorkspaceLayout& L = plan.workspace;
  auto* pair_experts = reinterpret_cast<int32_t*>(base + L.pair_experts);
  MoeRouting routing;
  routing.sorted_pairs = reinterpret_cast<int32_t*>(base + L.sorted_pairs);
  routing.capacity = plan.sorted_capacity;
  routing.block_experts = reinterpret_cast<int32_t*>(base + L.block_experts);
  routing.blocks = plan.blocks;
  routing.num_padded = reinterpret_cast<int32_t*>(base + L.num_padded);
  routing.pair_slots = reinterpret_cast<int32_t*>(base + L.pair_slots);

  // each pair's local expert: the vector kernels, the combine and the routing read the ids
  // themselves (the routing of many pairs through a table of them)
  const cuda_detail::PairExperts experts{ids.data, ids.int64, layer.expert_begin, E};
  if (batched) {
    cuda_detail::launch_moe_routing(experts, pairs, plan.block_size, pair_experts,
                                    reinterpret_cast<int32_t*>(base + L.segment_counts), routing.sorted_pairs,
                                    routing.capacity, routing.block_experts, routing.blocks, routing.num_padded,
                                    routing.pair_slots, stream);
  }
  const void* xb = x;
  int64_t xb_stride = x_row_stride;
  if (!x_bf16) {
    auto* rounded = reinterpret_cast<uint16_t*>(base + L.x_bf16);
    cuda_detail::launch_round_to_bf16(x, x_type, tokens, H, x_row_stride, rounded, stream);
    xb = rounded;
    xb_stride = H;
  }
  // act(gate) * up needs an 8-element multiple row stride to be read back 16 bytes at a time
  auto* gated = reinterpret_cast<uint16_t*>(base + L.gated);
  auto* down = reinterpret_cast<float*>(base + L.down);

  MoeProjection up{layer.w13_type, layer.w13, E, I, H, xb, xb_stride, top_k, pairs, nullptr, I};
  cuda_detail::MoeProjArgs a13 = proj_args(up, true, layer.activation);
  a13.out = gated;
  MoeProjection dn{layer.w2_type, layer.w2, E, H, I, gated, I, 1, pairs, down, H};
  cuda_detail::MoeProjArgs a2 = proj_args(dn, false, layer.activation);
  a13.int8_activations = base + L.x_int8;
  a2.int8_activations = base + L.gated_int8;
  for (cuda_detail::MoeProjArgs* a : {&a13, &a2}) {
    a->pair_experts = experts;
    a->sorted_pairs = routing.sorted_pairs;
    a->sorted_capacity = routing.capacity;
    a->block_experts = routing.block_experts;
    a->num_padded = routing.num_padded;
    a->block_size = plan.block_size;
  }
  // one buffer for both projections' permuted x: the down projection's prologue runs after the
  // gate/up kernel on the same stream
  uint8_t* const x_mmq = plan.grouped_mmq ? base + L.x_mmq : nullptr;
  // the grouped kernel's arithmetic per projection (its int8 rows take less than the bf16 buffer)
  a13.batched_int8 = plan.grouped_mmq && moe_batched_int8(layer.w13_type, plan.block_size, device_facts());
  a2.batched_int8 = plan.grouped_mmq && moe_batched_int8(layer.w2_type, plan.block_size, device_facts());
  launch_projection(layer.w13_type, a13, batched, stream, x_mmq);
  launch_projection(layer.w2_type, a2, batched, stream, x_mmq);
  cuda_detail::launch_moe_combine(down, topk_weights, experts, tokens, top_k, H, out, x_type, stream);
}

}  // namespace lowbit::cuda
