// MoE kernel selection and workspace layout (include/lowbit/moe_policy.h).
#include "lowbit/moe_policy.h"

#include <algorithm>
#include <sstream>

#include "cuda/common/int8_activation_layout.h"
#include "cuda/mmq/mmq_tiling.h"
#include "cuda/tuning/tuning.h"
#include "lowbit/error.h"
#include "lowbit/formats/all.h"
#include "lowbit/mmq_policy.h"

namespace lowbit {
namespace {

size_t align_up(size_t v, size_t a) {
  return (v + a - 1) / a * a;
}

}  // namespace

const char* moe_kernel_name(MoeKernel k) {
  switch (k) {
    case MoeKernel::kVector:
      return "moe_vec";
    case MoeKernel::kBatched:
      return "moe_batched";
  }
  return "unknown";
}

MoeKernel parse_moe_kernel(const std::string& name, const char* arg) {
  for (MoeKernel k : {MoeKernel::kVector, MoeKernel::kBatched})
    if (name == moe_kernel_name(k)) return k;
  detail::fail(arg, ": unknown MoE kernel \"", name, "\" (auto, moe_vec, moe_batched)");
}

int64_t moe_vector_max_tokens(const MoeShape& shape, const DeviceFacts& device) {
  LOWBIT_CHECK(shape.experts >= 1 && shape.top_k >= 1, "shape: E = ", shape.experts, " and top_k = ", shape.top_k,
               " must be >= 1");
  return tuning::moe_vector_max_tokens(device.compute_major, shape.experts, shape.top_k);
}

int moe_block_size(int64_t pairs, int64_t experts, const DeviceFacts& device) {
  LOWBIT_CHECK(pairs >= 0 && experts >= 1, "topk_ids: pairs must be >= 0 and E >= 1");
  if (!device.mmq) return kMoeBlockSize;
  // 1.5x the average: most experts of a balanced routing then take one block. A block's time barely
  // grows with its tile up to 64 tokens (the dense MMQ, benchmarks/NOTES.md), so fewer blocks win;
  // 48 spares the padding of a 64-token tile at about 32 pairs per expert.
  const int64_t want = (3 * pairs + 2 * experts - 1) / (2 * experts);
  for (int tile : {16, 32, 48, 64})
    if (want <= tile) return tile;
  return 128;
}

bool moe_batched_int8(QuantType t, int block_size, const DeviceFacts& device) {
  weight_type_info(static_cast<int64_t>(t), "qtype");
  // the grouped kernel's int8 path and its own tiles (not 48), whatever the tuning rows allow
  return device.mmq && cuda_detail::mmq_int8_token_tile(block_size) && mmq_int8_by_default(t, block_size);
}

bool moe_vec_int8(QuantType t) {
  weight_type_info(static_cast<int64_t>(t), "qtype");
  bool int8 = false;
  visit_weight_type(t, [&](auto traits) { int8 = HasInt8<decltype(traits)>::value; });
  return int8;
}

size_t moe_vec_activation_bytes(QuantType t, int64_t rows, int64_t k) {
  LOWBIT_CHECK(rows >= 0 && k >= 0, "x: rows and K must be >= 0, got ", rows, " and ", k);
  return moe_vec_int8(t) ? static_cast<size_t>(cuda_detail::int8_activation_bytes(rows, k)) : 0;
}

int64_t moe_sorted_capacity(int64_t pairs, int64_t experts, int block_size) {
  LOWBIT_CHECK(pairs >= 0 && experts >= 0, "topk_ids: pairs and experts must be >= 0");
  LOWBIT_CHECK(block_size >= 1, "block_size: must be >= 1, got ", block_size);
  return pairs + experts * (block_size - 1);
}

MoePlan plan_moe(const MoeShape& s, bool x_is_bf16, const DeviceFacts& device, const MoeKernel* force) {
  weight_type_info(static_cast<int64_t>(s.w13_type), "w13_type");
  weight_type_info(static_cast<int64_t>(s.w2_type), "w2_type");
  LOWBIT_CHECK(s.tokens >= 0, "x: token count must be >= 0, got ", s.tokens);
  LOWBIT_CHECK(s.experts >= 1 && s.experts <= kMoeMaxExperts, "w13: E = ", s.experts, " must be in [1, ",
               kMoeMaxExperts, "]");
  LOWBIT_CHECK(s.top_k >= 1 && s.top_k <= kMoeMaxTopK, "topk_ids: top_k = ", s.top_k, " must be in [1, ", kMoeMaxTopK,
               "]");
  LOWBIT_CHECK(s.hidden >= 1 && s.intermediate >= 1, "w13/w2: H = ", s.hidden, " and I = ", s.intermediate,
               " must be positive");
  MoePlan p;
  p.shape = s;
  p.x_is_bf16 = x_is_bf16;
  p.pairs = s.tokens * s.top_k;
  p.block_size = moe_block_size(p.pairs, s.experts, device);
  p.sorted_capacity = moe_sorted_capacity(p.pairs, s.experts, p.block_size);
  p.blocks = (p.sorted_capacity + p.block_size - 1) / p.block_size;
  p.segments = (p.pairs + kMoeRoutingSegment - 1) / kMoeRoutingSegment;
  const int64_t limit = moe_vector_max_tokens(s, device);
  const tuning::MoeVectorLimitRow* const row = tuning::moe_vector_limit_row(device.compute_major);
  std::ostringstream source;  // where the limit comes from
  if (row != nullptr)
    source << "measured vector limit: pairs per local expert below " << row->batched_pairs_per_expert;
  else
    source << "provisional vector limit";
  std::ostringstream why;
  if (force != nullptr) {
    LOWBIT_CHECK(*force == MoeKernel::kVector || *force == MoeKernel::kBatched, "kernel: unknown MoeKernel value ",
                 static_cast<int>(*force));
    p.kernel = *force;
    why << moe_kernel_name(p.kernel) << " forced by the caller";
  } else if (s.tokens <= limit) {
    p.kernel = MoeKernel::kVector;
    why << "T = " << s.tokens << " <= " << limit << " (" << source.str() << ", E = " << s.experts
        << ", top_k = " << s.top_k << "): one pass per pair over its expert";
  } else {
    p.kernel = MoeKernel::kBatched;
    why << "T = " << s.tokens << " > " << limit << " (" << source.str() << ", E = " << s.experts
        << ", top_k = " << s.top_k << "): pairs grouped per expert in blocks of " << p.block_size
        << ", tensor-core tiles over decoded weight tiles";
  }
  p.grouped_mmq = p.kernel == MoeKernel::kBatched && device.mmq;
  if (p.grouped_mmq) why << " (grouped MMQ, token tile " << p.block_size << ")";
  p.reason = why.str();

  MoeWorkspaceLayout& w = p.workspace;
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t start = at;
    at = align_up(at + bytes, 256);
    return start;
  };
  const auto i32 = [](int64_t n) { return static_cast<size_t>(n) * 4; };
  const bool batched = p.kernel == MoeKernel::kBatched;
  w.pair_experts = take(batched ? i32(p.pairs) : 0);  // the vector kernels read the ids themselves
  w.sorted_pairs = take(batched ? i32(p.sorted_capacity) : 0);
  w.block_experts = take(batched ? i32(p.blocks) : 0);
  w.num_padded = take(batched ? 4 : 0);
  w.pair_slots = take(batched ? i32(p.pairs) : 0);
  w.segment_counts = take(batched ? i32(p.segments * s.experts) : 0);
  w.x_bf16 = take(x_is_bf16 ? 0 : static_cast<size_t>(s.tokens * s.hidden) * 2);
  const auto k_padded = [](int64_t k) { return (k + 255) / 256 * 256; };  // MMQ's K unit
  w.x_mmq =
      take(p.grouped_mmq
               ? static_cast<size_t>(std::max(s.tokens * k_padded(s.hidden), p.pairs * k_padded(s.intermediate))) * 2
               : 0);
  w.gated = take(static_cast<size_t>(p.pairs * s.intermediate) * 2);
  w.down = take(static_cast<size_t>(p.pairs * s.hidden) * 4);
  w.x_int8 = take(batched ? 0 : moe_vec_activation_bytes(s.w13_type, s.tokens, s.hidden));
  w.gated_int8 = take(batched ? 0 : moe_vec_activation_bytes(s.w2_type, p.pairs, s.intermediate));
  w.total = at;
  return p;
}

}  // namespace lowbit
