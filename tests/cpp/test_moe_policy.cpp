// The MoE policy (plan_moe: kernel choice, routing sizes, workspace layout) and the CPU routing
// reference (cpu::moe_align), on any machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "lowbit/error.h"
#include "lowbit/moe_policy.h"
#include "lowbit/moe_routing.h"

namespace lowbit {
namespace {

const DeviceFacts kH200{9, 0, 132};
// the same with this build's sm_90a MMQ kernels: the batched projections run the grouped MMQ
const DeviceFacts kH200Mmq{9, 0, 132, 0, 0, true};

MoeShape qwen3(int64_t tokens) {
  return MoeShape{QuantType::IQ4_XS, QuantType::IQ4_XS, tokens, 128, 8, 2048, 768};
}

TEST(MoePolicy, VectorForFewTokensBatchedForMany) {
  const int64_t limit = moe_vector_max_tokens(qwen3(1), kH200);
  ASSERT_GE(limit, 1);
  EXPECT_EQ(plan_moe(qwen3(1), true, kH200).kernel, MoeKernel::kVector);
  EXPECT_EQ(plan_moe(qwen3(limit), true, kH200).kernel, MoeKernel::kVector);
  const MoePlan many = plan_moe(qwen3(limit + 1), true, kH200);
  EXPECT_EQ(many.kernel, MoeKernel::kBatched);
  // measured on the H200: the batched kernel from two pairs per local expert (E = 128, top-8: 32
  // tokens; DeepSeek-like E = 256: 64)
  EXPECT_EQ(limit, 31);
  EXPECT_NE(many.reason.find("measured vector limit: pairs per local expert below 2"), std::string::npos)
      << many.reason;
  const MoeShape deepseek{QuantType::IQ3_XXS, QuantType::IQ2_XS, 1, 256, 8, 7168, 2048};
  EXPECT_EQ(moe_vector_max_tokens(deepseek, kH200), 63);
  // held within the measured span of 8 to 64 tokens: E = 8, top-2 (7 by pairs) and E = 512, top-1
  EXPECT_EQ(moe_vector_max_tokens(MoeShape{QuantType::IQ4_XS, QuantType::IQ4_XS, 1, 8, 2, 256, 256}, kH200), 8);
  EXPECT_EQ(moe_vector_max_tokens(MoeShape{QuantType::IQ4_XS, QuantType::IQ4_XS, 1, 512, 1, 256, 256}, kH200), 64);
  EXPECT_EQ(plan_moe(MoeShape{QuantType::IQ4_XS, QuantType::IQ4_XS, 8, 1, 1, 256, 256}, true, kH200).kernel,
            MoeKernel::kVector);
  EXPECT_EQ(plan_moe(MoeShape{QuantType::IQ4_XS, QuantType::IQ4_XS, 9, 1, 1, 256, 256}, true, kH200).kernel,
            MoeKernel::kBatched);
  EXPECT_THROW(moe_vector_max_tokens(MoeShape{}, kH200), Error);  // E and top_k 0
  const DeviceFacts a100{8, 0, 108};                              // never measured: the provisional limit
  EXPECT_EQ(moe_vector_max_tokens(qwen3(1), a100), 16);
  EXPECT_NE(plan_moe(qwen3(17), true, a100).reason.find("provisional"), std::string::npos);
  const MoeKernel forced = MoeKernel::kBatched;
  EXPECT_EQ(plan_moe(qwen3(1), true, kH200, &forced).kernel, MoeKernel::kBatched);
  EXPECT_STREQ(moe_kernel_name(MoeKernel::kVector), "moe_vec");
  EXPECT_EQ(parse_moe_kernel("moe_batched"), MoeKernel::kBatched);
  EXPECT_THROW(parse_moe_kernel("auto"), Error);
}

TEST(MoePolicy, RoutingSizesAreHostUpperBounds) {
  const MoePlan p = plan_moe(qwen3(1000), true, kH200);
  EXPECT_EQ(p.pairs, 8000);
  EXPECT_EQ(p.sorted_capacity, 8000 + 128 * (kMoeBlockSize - 1));
  EXPECT_EQ(p.blocks, (p.sorted_capacity + kMoeBlockSize - 1) / kMoeBlockSize);
  EXPECT_EQ(p.segments, (8000 + kMoeRoutingSegment - 1) / kMoeRoutingSegment);
}

TEST(MoePolicy, WorkspaceBuffersAreAlignedAndDisjoint) {
  for (const DeviceFacts& device : {kH200, kH200Mmq})
    for (bool bf16 : {true, false})
      for (int64_t tokens : {int64_t{1}, int64_t{7}, int64_t{129}, int64_t{4096}}) {
        const MoePlan p = plan_moe(qwen3(tokens), bf16, device);
        const auto k_pad = [](int64_t k) { return (k + 255) / 256 * 256; };
        const MoeWorkspaceLayout& w = p.workspace;
        const int64_t pairs = p.pairs;
        const bool batched = p.kernel == MoeKernel::kBatched;
        struct Buffer {
          size_t at, bytes;
        };
        std::vector<Buffer> buffers = {
            {w.pair_experts, batched ? static_cast<size_t>(pairs) * 4 : 0},
            {w.sorted_pairs, batched ? static_cast<size_t>(p.sorted_capacity) * 4 : 0},
            {w.block_experts, batched ? static_cast<size_t>(p.blocks) * 4 : 0},
            {w.num_padded, batched ? 4u : 0u},
            {w.pair_slots, batched ? static_cast<size_t>(pairs) * 4 : 0},
            {w.segment_counts, batched ? static_cast<size_t>(p.segments * 128) * 4 : 0},
            {w.x_bf16, bf16 ? 0 : static_cast<size_t>(tokens * 2048) * 2},
            {w.x_mmq, p.grouped_mmq ? static_cast<size_t>(std::max(tokens * k_pad(2048), pairs * k_pad(768))) * 2 : 0},
            {w.gated, static_cast<size_t>(pairs * 768) * 2},
            {w.down, static_cast<size_t>(pairs * 2048) * 4},
            // IQ4_XS has an int8 form: the vector path quantizes x (tokens x H) and act(gate) * up
            // (pairs x I), scales in chunks of eight rows ([K/32][8] floats = K bytes each) then codes
            {w.x_int8, batched ? 0 : static_cast<size_t>((tokens + 7) / 8 * 2048 + tokens * 2048)},
            {w.gated_int8, batched ? 0 : static_cast<size_t>((pairs + 7) / 8 * 768 + pairs * 768)},
        };
        size_t end = 0;
        for (const Buffer& b : buffers) {
          EXPECT_EQ(b.at % 256, 0u);
          EXPECT_GE(b.at, end);  // in order, no overlap
          end = b.at + b.bytes;
        }
        EXPECT_GE(w.total, end);
      }
}

TEST(MoePolicy, GroupedMmqTokenTileFollowsPairsPerExpert) {
  EXPECT_EQ(moe_block_size(128 * 8, 128, kH200Mmq), 16);  // 8 pairs per expert: 1.5x is 12
  EXPECT_EQ(moe_block_size(170 * 8, 128, kH200Mmq), 16);  // 10.6: 1.5x rounds up to 16
  EXPECT_EQ(moe_block_size(171 * 8, 128, kH200Mmq), 32);
  EXPECT_EQ(moe_block_size(256 * 8, 128, kH200Mmq), 32);
  EXPECT_EQ(moe_block_size(512 * 8, 128, kH200Mmq), 48);  // 32 per expert: 48
  EXPECT_EQ(moe_block_size(513 * 8, 128, kH200Mmq), 64);  // 48.1
  EXPECT_EQ(moe_block_size(683 * 8, 128, kH200Mmq), 128);
  EXPECT_EQ(moe_block_size(4096 * 8, 128, kH200Mmq), 128);
  EXPECT_EQ(moe_block_size(0, 128, kH200Mmq), 16);
  EXPECT_EQ(moe_block_size(4096 * 8, 128, kH200), kMoeBlockSize);  // no sm_90a kernels: the mma.sync tile
  EXPECT_THROW(moe_block_size(-1, 128, kH200Mmq), Error);

  const MoePlan p = plan_moe(qwen3(512), true, kH200Mmq);
  EXPECT_EQ(p.kernel, MoeKernel::kBatched);
  EXPECT_TRUE(p.grouped_mmq);
  EXPECT_EQ(p.block_size, 48);
  EXPECT_EQ(p.sorted_capacity, 4096 + 128 * 47);
  EXPECT_EQ(p.blocks, (p.sorted_capacity + 47) / 48);
  EXPECT_NE(p.reason.find("grouped MMQ, token tile 48"), std::string::npos) << p.reason;
  EXPECT_GE(p.workspace.gated - p.workspace.x_mmq, size_t{4096} * 768 * 2);  // the down projection's x
  const MoePlan vec = plan_moe(qwen3(4), true, kH200Mmq);
  EXPECT_FALSE(vec.grouped_mmq);
  EXPECT_EQ(vec.workspace.gated, vec.workspace.x_mmq);  // nothing between them
  EXPECT_FALSE(plan_moe(qwen3(512), true, kH200).grouped_mmq);
}

TEST(MoePolicy, VectorPathInt8ActivationsPerType) {
  EXPECT_TRUE(moe_vec_int8(QuantType::IQ2_XXS));
  EXPECT_TRUE(moe_vec_int8(QuantType::MXFP4_SPLIT));
  EXPECT_FALSE(moe_vec_int8(QuantType::MXFP8_E4M3));  // no int8 form: float32 on bf16 activations
  EXPECT_THROW(moe_vec_int8(QuantType::Q8_1), Error);
  // 9 rows of K = 256: two chunks of scales (2 x 256 bytes), then 9 x 256 codes
  EXPECT_EQ(moe_vec_activation_bytes(QuantType::IQ3_S, 9, 256), 2u * 256 + 9 * 256);
  EXPECT_EQ(moe_vec_activation_bytes(QuantType::Q8_0, 8, 64), 64u + 8 * 64);
  EXPECT_EQ(moe_vec_activation_bytes(QuantType::Q8_0, 0, 64), 0u);
  EXPECT_EQ(moe_vec_activation_bytes(QuantType::MXFP8_E4M3, 9, 256), 0u);
  EXPECT_THROW(moe_vec_activation_bytes(QuantType::Q8_0, -1, 64), Error);
  // the float32 vector kernel's layer reserves no int8 activations
  const MoeShape mx{QuantType::MXFP8_E4M3, QuantType::MXFP8_E4M3, 3, 16, 2, 256, 128};
  const MoePlan p = plan_moe(mx, true, kH200);
  ASSERT_EQ(p.kernel, MoeKernel::kVector);
  EXPECT_EQ(p.workspace.gated_int8, p.workspace.total);
  EXPECT_EQ(p.workspace.x_int8, p.workspace.gated_int8);
}

TEST(MoePolicy, RejectsShapesBeyondTheKernels) {
  MoeShape s = qwen3(4);
  s.experts = kMoeMaxExperts + 1;
  EXPECT_THROW(plan_moe(s, true, kH200), Error);
  s = qwen3(4);
  s.top_k = kMoeMaxTopK + 1;
  EXPECT_THROW(plan_moe(s, true, kH200), Error);
  s = qwen3(4);
  s.w2_type = QuantType::Q8_1;
  try {
    plan_moe(s, true, kH200);
    FAIL() << "Q8_1 is not a weight type";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("w2_type"), std::string::npos) << e.what();
  }
  s = qwen3(-1);
  EXPECT_THROW(plan_moe(s, true, kH200), Error);
}

struct Routing {
  std::vector<int32_t> sorted, blocks, slots;
  int32_t used = -1;
};

Routing align(const std::vector<int64_t>& ids, int64_t experts, int64_t begin, int block) {
  const auto pairs = static_cast<int64_t>(ids.size());
  const int64_t capacity = moe_sorted_capacity(pairs, experts, block);
  Routing r;
  r.sorted.assign(static_cast<size_t>(capacity), -7);
  r.blocks.assign(static_cast<size_t>((capacity + block - 1) / block), -7);
  r.slots.assign(ids.size(), -7);
  cpu::moe_align(ids.data(), pairs, experts, begin, block, r.sorted.data(), capacity, r.blocks.data(),
                 static_cast<int64_t>(r.blocks.size()), &r.used, r.slots.data());
  return r;
}

TEST(MoeRouting, SmallCaseByHand) {
  // pairs 0..5 of 3 tokens x top-2; experts [2, 5) are local (begin 2, E = 3); block 4
  const std::vector<int64_t> ids = {2, 4, 4, -1, 9, 2};
  const Routing r = align(ids, 3, 2, 4);
  const int32_t s = 6;  // sentinel = pairs
  EXPECT_EQ(r.sorted, (std::vector<int32_t>{0, 5, s, s, 1, 2, s, s, s, s, s, s, s, s, s}));
  EXPECT_EQ(r.blocks, (std::vector<int32_t>{0, 2, -1, -1}));
  EXPECT_EQ(r.used, 8);
  EXPECT_EQ(r.slots, (std::vector<int32_t>{0, 4, 5, -1, -1, 1}));
}

TEST(MoeRouting, RandomRoutingKeepsEveryInvariant) {
  std::mt19937 rng(std::random_device{}());
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t experts = 1 + static_cast<int64_t>(rng() % 40), begin = rng() % 3;
    const int block = 1 + static_cast<int>(rng() % 70);
    const int64_t pairs = static_cast<int64_t>(rng() % 600);
    std::vector<int64_t> ids(static_cast<size_t>(pairs));
    for (auto& id : ids) id = static_cast<int64_t>(rng() % (experts + 6)) - 2;  // some negative, some past E
    const Routing r = align(ids, experts, begin, block);
    ASSERT_EQ(r.used % block, 0);
    std::vector<int64_t> seen(static_cast<size_t>(pairs), 0);
    int64_t last_expert = -1, last_pair = -1;
    for (int64_t row = 0; row < static_cast<int64_t>(r.sorted.size()); ++row) {
      const int32_t p = r.sorted[static_cast<size_t>(row)];
      if (row >= r.used) {
        EXPECT_EQ(p, pairs);
        continue;
      }
      const int32_t e = r.blocks[static_cast<size_t>(row / block)];
      ASSERT_GE(e, 0);
      if (e != last_expert) {
        EXPECT_GT(e, last_expert);  // experts in increasing order, each in one run
        EXPECT_EQ(row % block, 0);
        last_expert = e;
        last_pair = -1;
      }
      if (p == pairs) continue;  // padding
      ASSERT_GE(p, 0);
      ASSERT_LT(p, pairs);
      EXPECT_EQ(moe_local_expert(ids[static_cast<size_t>(p)], begin, experts), e);
      EXPECT_GT(p, last_pair);  // stable: increasing pair order within an expert
      last_pair = p;
      EXPECT_EQ(r.slots[static_cast<size_t>(p)], row);
      ++seen[static_cast<size_t>(p)];
    }
    for (int64_t p = 0; p < pairs; ++p) {
      const bool local = moe_local_expert(ids[static_cast<size_t>(p)], begin, experts) >= 0;
      EXPECT_EQ(seen[static_cast<size_t>(p)], local ? 1 : 0);
      if (!local) EXPECT_EQ(r.slots[static_cast<size_t>(p)], -1);
    }
    for (size_t b = static_cast<size_t>(r.used / block); b < r.blocks.size(); ++b) EXPECT_EQ(r.blocks[b], -1);
  }
}

TEST(MoeRouting, RejectsTooSmallBuffers) {
  const std::vector<int64_t> ids = {0, 1};
  std::vector<int32_t> sorted(2), blocks(2), slots(2);
  int32_t used = 0;
  EXPECT_THROW(cpu::moe_align(ids.data(), 2, 2, 0, 4, sorted.data(), 2, blocks.data(), 2, &used, slots.data()), Error);
  EXPECT_THROW(cpu::moe_align(ids.data(), 2, 0, 0, 4, sorted.data(), 2, blocks.data(), 2, &used, slots.data()), Error);
}

}  // namespace
}  // namespace lowbit
