// The MoE ops' schemas (added to the lowbit library) and their CPU implementations: plain
// reference loops over the routed pairs, the oracle of the CUDA kernels.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <vector>

#include "lowbit/cpu.h"
#include "lowbit/moe_routing.h"
#include "moe_op_plans.h"

TORCH_LIBRARY_FRAGMENT(lowbit, m) {
  // Routing in the moe_align_block_size convention (lowbit/moe_routing.h): returns
  // (sorted_pair_ids, block_experts, num_padded, pair_slots), all int32.
  m.def(
      "moe_align(Tensor topk_ids, int num_experts, int block_size=64, *, int[]? expert_range=None) -> (Tensor, "
      "Tensor, Tensor, Tensor)");
  // One projection per (token, k) pair: out[p] = W[topk_ids[p]] x[p / top_k], [pairs, N].
  m.def(
      "moe_vec(Tensor x, Tensor w, int qtype, Tensor topk_ids, int top_k, *, Tensor? scales=None, "
      "int[]? expert_range=None) -> Tensor");
  // The same over moe_align's routing made with `block_size`: rows of dropped pairs are zero
  // (written where they are dropped when moe_align's pair_slots come along, else by zeroing the
  // whole output first).
  m.def(
      "moe_batched(Tensor x, Tensor w, int qtype, Tensor sorted_pair_ids, Tensor block_experts, Tensor num_padded, "
      "int top_k, SymInt pairs, *, Tensor? scales=None, int block_size=64, str math=\"auto\", "
      "Tensor? pair_slots=None) -> Tensor");
  // The routing block size moe_batched runs fastest with for `pairs` pairs over E experts on
  // `device` (lowbit::moe_block_size: the grouped MMQ's token tile on Hopper, else 64).
  m.def("moe_block_size(int pairs, int experts, Device device) -> int",
        [](int64_t pairs, int64_t experts, c10::Device device) -> int64_t {
          using namespace lowbit;
          return torch_ops::translate_errors(
              [&] { return static_cast<int64_t>(moe_block_size(pairs, experts, torch_ops::device_facts(device))); });
        });
  // Whether moe_batched (math "auto") and the fused layer's batched path run type qtype's routing
  // blocks of block_size on the grouped MMQ's int8 path on `device` (lowbit::mmq_int8_by_default
  // where the grouped MMQ runs).
  m.def("moe_batched_int8(int qtype, int block_size, Device device) -> bool",
        [](int64_t qtype, int64_t block_size, c10::Device device) -> bool {
          using namespace lowbit;
          TORCH_CHECK_VALUE(block_size >= 1 && block_size <= 1024, "block_size must be in [1, 1024], got ", block_size);
          return torch_ops::translate_errors([&] {
            return moe_batched_int8(weight_type_info(qtype, "qtype").type, static_cast<int>(block_size),
                                    torch_ops::device_facts(device));
          });
        });
  // fused_moe with the kernel named by `route`: "auto", "moe_vec" or "moe_batched" (benchmarks,
  // tests; not `kernel`, which Inductor's fallback lowering takes for itself).
  m.def(
      "moe_layer(Tensor x, Tensor w13, Tensor w2, Tensor topk_weights, Tensor topk_ids, *, int w13_type, "
      "int w2_type, str activation=\"silu\", Tensor? w13_scales=None, Tensor? w2_scales=None, "
      "int[]? expert_range=None, str route=\"auto\") -> Tensor");
  // The kernel fused_moe runs for this shape on `device` (lowbit::MoeKernel as int).
  m.def(
      "moe_select_kernel(int w13_type, int w2_type, int tokens, int experts, int top_k, int hidden, int intermediate, "
      "Device device) -> int",
      [](int64_t w13_type, int64_t w2_type, int64_t tokens, int64_t experts, int64_t top_k, int64_t hidden,
         int64_t intermediate, c10::Device device) -> int64_t {
        using namespace lowbit;
        return torch_ops::translate_errors([&] {
          const MoeShape shape{weight_type_info(w13_type, "w13_type").type,
                               weight_type_info(w2_type, "w2_type").type,
                               tokens,
                               experts,
                               top_k,
                               hidden,
                               intermediate};
          return static_cast<int64_t>(plan_moe(shape, true, torch_ops::device_facts(device)).kernel);
        });
      });
}

namespace lowbit::torch_ops {
namespace {

at::Tensor dequantize_expert_float(const WeightArg& w, int64_t e) {
  at::Tensor out = at::empty({w.rows, w.k}, at::TensorOptions().dtype(at::kFloat));
  WeightView v = w.view;
  v.data = static_cast<const uint8_t*>(w.view.data) + e * w.view.expert_stride;
  v.scales = w.view.scales ? w.view.scales + e * w.view.scale_expert_stride : nullptr;
  translate_errors([&] { cpu::dequantize(w.type, v, w.rows, w.k, out.data_ptr(), FloatType::F32, w.k); });
  return out;
}

// y[pairs[i]] = W[e] x[pairs[i] / top_k] for the pairs of one expert.
void project_pairs(const WeightArg& w, int64_t e, const std::vector<int64_t>& pairs, const at::Tensor& xf,
                   int64_t top_k, at::Tensor& y) {
  if (pairs.empty()) return;
  const at::Tensor idx = at::tensor(pairs, at::kLong);
  const at::Tensor rows = xf.index_select(0, at::div(idx, top_k, "floor"));
  y.index_copy_(0, idx, at::matmul(rows, dequantize_expert_float(w, e).t()));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> moe_align_cpu(const at::Tensor& topk_ids,
                                                                         int64_t num_experts, int64_t block_size,
                                                                         at::OptionalIntArrayRef expert_range) {
  const MoeAlignPlan p = plan_moe_align(topk_ids, num_experts, block_size, expert_range);
  const at::Tensor ids = topk_ids.reshape({-1}).to(at::kLong).contiguous();
  const auto i32 = at::TensorOptions().dtype(at::kInt);
  at::Tensor sorted = at::empty({p.capacity}, i32), blocks = at::empty({p.blocks}, i32);
  at::Tensor used = at::empty({1}, i32), slots = at::empty({p.pairs}, i32);
  translate_errors([&] {
    cpu::moe_align(ids.data_ptr<int64_t>(), p.pairs, p.experts, p.begin, static_cast<int>(p.block_size),
                   sorted.data_ptr<int32_t>(), p.capacity, blocks.data_ptr<int32_t>(), p.blocks,
                   used.data_ptr<int32_t>(), slots.data_ptr<int32_t>());
  });
  return {sorted, blocks, used, slots};
}

at::Tensor moe_vec_cpu(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const at::Tensor& topk_ids,
                       int64_t top_k, const std::optional<at::Tensor>& scales, at::OptionalIntArrayRef expert_range) {
  const MoeProjPlan p = plan_moe_vec(x, w, qtype, topk_ids, top_k, scales, expert_range);
  const at::Tensor ids = topk_ids.reshape({-1}).to(at::kLong).contiguous();
  const int64_t* id = ids.data_ptr<int64_t>();
  std::vector<std::vector<int64_t>> by_expert(static_cast<size_t>(p.w.experts));
  for (int64_t q = 0; q < p.pairs; ++q) {
    const int32_t e = moe_local_expert(id[q], p.begin, p.w.experts);
    if (e >= 0) by_expert[static_cast<size_t>(e)].push_back(q);
  }
  at::Tensor y = at::zeros({p.pairs, p.w.rows}, at::TensorOptions().dtype(at::kFloat));
  const at::Tensor xf = x.to(at::kFloat);
  for (int64_t e = 0; e < p.w.experts; ++e) project_pairs(p.w, e, by_expert[static_cast<size_t>(e)], xf, top_k, y);
  return y.to(x.scalar_type());
}

at::Tensor moe_batched_cpu(const at::Tensor& x, const at::Tensor& w, int64_t qtype, const at::Tensor& sorted_pair_ids,
                           const at::Tensor& block_experts, const at::Tensor& num_padded, int64_t top_k, int64_t pairs,
                           const std::optional<at::Tensor>& scales, int64_t block_size, c10::string_view math,
                           const std::optional<at::Tensor>& pair_slots) {
  // the CPU computes the exact reference whatever arithmetic `math` names for CUDA (and zeros
  // every row first, so the pair slots are checked, not needed)
  const MoeProjPlan p = plan_moe_batched(x, w, qtype, sorted_pair_ids, block_experts, num_padded, top_k, pairs, scales,
                                         block_size, math, pair_slots);
  const at::Tensor sorted = sorted_pair_ids.contiguous(), blocks = block_experts.contiguous();
  const int64_t capacity = sorted.numel();
  const int64_t used = std::min<int64_t>(std::max<int64_t>(num_padded[0].item<int32_t>(), 0), capacity);
  const int32_t* s = sorted.data_ptr<int32_t>();
  const int32_t* be = blocks.data_ptr<int32_t>();
  std::vector<std::vector<int64_t>> by_expert(static_cast<size_t>(p.w.experts));
  for (int64_t r = 0; r < used; ++r) {
    const int32_t e = be[r / block_size];
    if (e < 0 || e >= p.w.experts || s[r] < 0 || s[r] >= pairs) continue;
    by_expert[static_cast<size_t>(e)].push_back(s[r]);
  }
  at::Tensor y = at::zeros({pairs, p.w.rows}, at::TensorOptions().dtype(at::kFloat));
  const at::Tensor xf = x.to(at::kFloat);
  for (int64_t e = 0; e < p.w.experts; ++e) project_pairs(p.w, e, by_expert[static_cast<size_t>(e)], xf, top_k, y);
  return y.to(x.scalar_type());
}

at::Tensor moe_layer_cpu(const at::Tensor& x, const at::Tensor& w13, const at::Tensor& w2,
                         const at::Tensor& topk_weights, const at::Tensor& topk_ids, int64_t w13_type, int64_t w2_type,
                         c10::string_view activation, const std::optional<at::Tensor>& w13_scales,
                         const std::optional<at::Tensor>& w2_scales, at::OptionalIntArrayRef expert_range,
                         c10::string_view kernel) {
  const std::optional<MoeKernel> forced = parse_moe_layer_kernel(kernel);
  TORCH_CHECK_VALUE(!forced.has_value(), "route: \"", std::string(kernel),
                    "\" needs a CUDA device; on the CPU use \"auto\" (the reference)");
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("lowbit::fused_moe", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                            const at::Tensor&, int64_t, int64_t, c10::string_view, const std::optional<at::Tensor>&,
                            const std::optional<at::Tensor>&, at::OptionalIntArrayRef)>();
  return op.call(x, w13, w2, topk_weights, topk_ids, w13_type, w2_type, activation, w13_scales, w2_scales,
                 expert_range);
}

}  // namespace

TORCH_LIBRARY_IMPL(lowbit, CPU, m) {
  m.impl("moe_align", &moe_align_cpu);
  m.impl("moe_vec", &moe_vec_cpu);
  m.impl("moe_batched", &moe_batched_cpu);
  m.impl("moe_layer", &moe_layer_cpu);
}

}  // namespace lowbit::torch_ops
