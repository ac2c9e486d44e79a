// The dispatcher's policy: pure functions over measured thresholds.
#include <gtest/gtest.h>

#include <string>

#include "cuda/mmq/mmq_tiling.h"
#include "cuda/tuning/tuning.h"
#include "lowbit/dispatch.h"
#include "lowbit/error.h"
#include "lowbit/mmq_policy.h"
#include "lowbit/moe_policy.h"
#include "lowbit/plan.h"

namespace lowbit {
namespace {

TEST(Dispatch, CpuRunsTheReference) {
  EXPECT_EQ(select_dense(QuantType::IQ2_XXS, 4, 4096, 14336, DeviceFacts{}).kernel, DenseKernel::kCpuReference);
}

TEST(Dispatch, HopperUsesMmvqThroughTwoPasses) {
  const DeviceFacts h200{9, 0, 132};
  for (QuantType t : {QuantType::IQ1_S, QuantType::IQ4_XS, QuantType::MXFP8_E4M3, QuantType::Q8_0}) {
    EXPECT_EQ(select_dense(t, 1, 4096, 14336, h200).kernel, DenseKernel::kMmvq);
    EXPECT_EQ(select_dense(t, 32, 4096, 14336, h200).kernel, DenseKernel::kMmvq);
    EXPECT_EQ(select_dense(t, 33, 4096, 14336, h200).kernel, DenseKernel::kDequantMatmul);
  }
  const DenseChoice c = select_dense(QuantType::IQ3_S, 24, 4096, 14336, h200);
  EXPECT_NE(c.reason.find("2 passes"), std::string::npos) << c.reason;
}

TEST(Dispatch, MmvqArithmetic) {
  EXPECT_TRUE(mmvq_int8_supported(QuantType::IQ4_XS, 1));
  EXPECT_TRUE(mmvq_int8_supported(QuantType::Q5_0, 8));
  EXPECT_FALSE(mmvq_int8_supported(QuantType::IQ4_XS, 9));
  EXPECT_FALSE(mmvq_int8_supported(QuantType::MXFP8_E4M3, 1));
  EXPECT_FALSE(mmvq_int8_supported(QuantType::Q8_1, 1));
  EXPECT_EQ(resolve_mmvq_math(QuantType::IQ2_S, 4, MmvqMath::kAuto), MmvqMath::kInt8);
  EXPECT_EQ(resolve_mmvq_math(QuantType::IQ2_S, 12, MmvqMath::kAuto), MmvqMath::kBf16);
  EXPECT_EQ(resolve_mmvq_math(QuantType::MXFP8_E4M3, 1, MmvqMath::kAuto), MmvqMath::kBf16);
  EXPECT_EQ(resolve_mmvq_math(QuantType::IQ2_S, 4, MmvqMath::kBf16), MmvqMath::kBf16);
  EXPECT_EQ(parse_mmvq_math("int8"), MmvqMath::kInt8);
  EXPECT_STREQ(mmvq_math_name(MmvqMath::kBf16), "bf16");
  EXPECT_THROW(parse_mmvq_math("fp4"), Error);
  const DeviceFacts h200{9, 0, 132};
  EXPECT_NE(select_dense(QuantType::IQ3_S, 3, 4096, 14336, h200).reason.find("int8"), std::string::npos);
  EXPECT_NE(select_dense(QuantType::IQ3_S, 12, 4096, 14336, h200).reason.find("bf16"), std::string::npos);
}

TEST(Dispatch, UnmeasuredGpusStayConservative) {
  const DeviceFacts a100{8, 0, 108};
  EXPECT_EQ(select_dense(QuantType::IQ2_S, 8, 4096, 4096, a100).kernel, DenseKernel::kMmvq);
  EXPECT_EQ(select_dense(QuantType::IQ2_S, 9, 4096, 4096, a100).kernel, DenseKernel::kDequantMatmul);
}

TEST(Dispatch, NamesAndErrors) {
  EXPECT_EQ(parse_dense_kernel("mmvq"), DenseKernel::kMmvq);
  EXPECT_STREQ(dense_kernel_name(DenseKernel::kDequantMatmul), "dequant_matmul");
  EXPECT_THROW(parse_dense_kernel("fast"), Error);
  EXPECT_THROW(select_dense(QuantType::Q8_1, 1, 1, 32, DeviceFacts{9, 0, 132}), Error);
}

TEST(Dispatch, MmqServesItsMeasuredRangeWhereItRuns) {
  DeviceFacts h200{9, 0, 132};
  h200.mmq = true;
  EXPECT_EQ(select_dense(QuantType::IQ2_XXS, 16, 4096, 14336, h200).kernel, DenseKernel::kMmvq);
  // the nibble formats' int8 MMQ from 9 tokens (math auto); bf16 asked for: MMVQ as before
  EXPECT_EQ(select_dense(QuantType::IQ4_XS, 9, 4096, 14336, h200).kernel, DenseKernel::kMmq);
  EXPECT_EQ(select_dense(QuantType::IQ4_XS, 8, 4096, 14336, h200).kernel, DenseKernel::kMmvq);
  PlanOptions bf16;
  bf16.math = MmvqMath::kBf16;
  EXPECT_EQ(plan_linear(QuantType::IQ4_XS, 16, 4096, 14336, h200, bf16).kernel, DenseKernel::kMmvq);
  for (QuantType t : {QuantType::IQ4_NL, QuantType::IQ1_S}) {
    const Plan p = plan_linear(t, 12, 4096, 14336, h200, PlanOptions{});
    EXPECT_EQ(p.kernel, DenseKernel::kMmq) << type_name(t);
    EXPECT_TRUE(p.mmq.int8) << type_name(t);
  }
  // int8 asked for past the int8 MMVQ's 8 tokens: MMQ's int8 path where the type has it, else the
  // int8 MMVQ's error
  PlanOptions int8;
  int8.math = MmvqMath::kInt8;
  const Plan asked = plan_linear(QuantType::IQ2_XXS, 12, 4096, 14336, h200, int8);
  EXPECT_EQ(asked.kernel, DenseKernel::kMmq);
  EXPECT_TRUE(asked.mmq.int8);
  EXPECT_EQ(plan_linear(QuantType::IQ2_XXS, 8, 4096, 14336, h200, int8).kernel, DenseKernel::kMmvq);
  EXPECT_THROW(plan_linear(QuantType::IQ2_S, 12, 4096, 14336, h200, int8), Error);
  EXPECT_EQ(select_dense(QuantType::IQ4_XS, 17, 4096, 14336, h200).kernel, DenseKernel::kMmq);
  EXPECT_EQ(select_dense(QuantType::IQ1_M, 128, 4096, 14336, h200).kernel, DenseKernel::kMmq);
  EXPECT_EQ(select_dense(QuantType::IQ4_XS, 129, 4096, 14336, h200).kernel, DenseKernel::kDequantMatmul);
  // K below the tuning row's short_k: MMQ up to 32 tokens, then dequantize + bf16 GEMM (the MMVQ
  // limit is 32 too); K = 4096 keeps the whole range
  EXPECT_EQ(select_dense(QuantType::IQ2_XXS, 32, 18944, 1024, h200).kernel, DenseKernel::kMmq);
  EXPECT_EQ(select_dense(QuantType::IQ2_XXS, 33, 18944, 1024, h200).kernel, DenseKernel::kDequantMatmul);
  EXPECT_EQ(select_dense(QuantType::IQ4_XS, 128, 18944, 3840, h200).kernel, DenseKernel::kDequantMatmul);
  EXPECT_EQ(select_dense(QuantType::IQ4_XS, 128, 14336, 4096, h200).kernel, DenseKernel::kMmq);
  EXPECT_EQ(select_dense(QuantType::IQ4_XS, 64, 14336, 4096, h200).kernel, DenseKernel::kMmq);
  const DeviceFacts no_mmq{9, 0, 132};  // a build without sm_90a kernels
  EXPECT_NE(select_dense(QuantType::IQ4_XS, 64, 4096, 14336, no_mmq).kernel, DenseKernel::kMmq);
  EXPECT_EQ(select_dense(QuantType::IQ4_XS, 9, 4096, 14336, no_mmq).kernel, DenseKernel::kMmvq);
  DeviceFacts a100{8, 0, 108};
  a100.mmq = true;  // never claimed on other architectures, but the policy must not trust it
  EXPECT_NE(select_dense(QuantType::IQ4_XS, 64, 4096, 14336, a100).kernel, DenseKernel::kMmq);
  EXPECT_NE(select_dense(QuantType::IQ4_XS, 9, 4096, 14336, a100).kernel, DenseKernel::kMmq);
}

TEST(MmqPolicy, TilesSplitsAndWorkspace) {
  const DeviceFacts h200{9, 0, 132};
  // 32 row tiles of one 16-token tile: two blocks per multiprocessor leave room for 8 splits
  MmqConfig c = select_mmq_config(QuantType::IQ4_XS, 16, 4096, 14336, h200, MmvqMath::kBf16);
  EXPECT_EQ(c.tokens_per_tile, 16);
  EXPECT_EQ(c.rows_per_tile, 128);
  EXPECT_EQ(c.splits, 8);
  EXPECT_EQ(c.k_pad, 14336);
  EXPECT_EQ(c.activation_bytes, size_t{16} * 14336 * 2);
  EXPECT_EQ(c.partial_bytes, size_t{8} * 16 * 4096 * 4);
  // enough tiles: no split, no partial sums
  c = select_mmq_config(QuantType::IQ2_XXS, 2048, 4096, 14336, h200);
  EXPECT_EQ(c.tokens_per_tile, 128);
  EXPECT_EQ(c.splits, 1);
  EXPECT_EQ(c.workspace_bytes(), size_t{2048} * 14336 * 2);
  // a 32-weight type with K not a multiple of 256 pads K; few units cap the split
  c = select_mmq_config(QuantType::Q8_0, 40, 200, 800, h200);
  EXPECT_EQ(c.k_pad, 1024);
  EXPECT_EQ(c.tokens_per_tile, 64);
  EXPECT_EQ(c.splits, 1);
  // the partial buffer stays within kMmqMaxPartialBytes
  c = select_mmq_config(QuantType::IQ3_S, 100, 8192, 65536, h200);
  EXPECT_LE(c.partial_bytes, kMmqMaxPartialBytes);
  EXPECT_THROW(select_mmq_config(QuantType::IQ4_XS, 0, 4096, 14336, h200), Error);
  EXPECT_THROW(select_mmq_config(QuantType::IQ4_XS, 16, 4096, 100, h200), Error);
  EXPECT_THROW(select_mmq_config(QuantType::Q8_1, 16, 4096, 256, h200), Error);
}

TEST(MmqPolicy, Int8ArithmeticTypesTilesAndWorkspace) {
  const DeviceFacts h200{9, 0, 132};
  // auto: int8 where measured faster (the nibble formats up to 32-token tiles, three grid formats at
  // 16), else bf16
  EXPECT_TRUE(select_mmq_config(QuantType::IQ4_XS, 32, 4096, 14336, h200).int8);
  EXPECT_TRUE(select_mmq_config(QuantType::IQ1_S, 9, 4096, 14336, h200).int8);
  EXPECT_FALSE(select_mmq_config(QuantType::IQ4_XS, 33, 4096, 14336, h200).int8);
  EXPECT_TRUE(select_mmq_config(QuantType::IQ2_XXS, 16, 4096, 14336, h200).int8);
  EXPECT_FALSE(select_mmq_config(QuantType::IQ2_XXS, 17, 4096, 14336, h200).int8);
  EXPECT_FALSE(select_mmq_config(QuantType::IQ2_S, 16, 4096, 14336, h200).int8);  // 16-weight scales
  EXPECT_FALSE(select_mmq_config(QuantType::IQ4_XS, 16, 4096, 14336, h200, MmvqMath::kBf16).int8);
  EXPECT_TRUE(mmq_int8_by_default(QuantType::IQ4_NL, 32));
  EXPECT_FALSE(mmq_int8_by_default(QuantType::IQ4_NL, 64));
  // the batched MoE kernel follows the rule where the grouped MMQ runs that tile
  DeviceFacts hopper = h200;
  hopper.mmq = true;
  EXPECT_TRUE(moe_batched_int8(QuantType::IQ4_XS, 16, hopper));
  EXPECT_FALSE(moe_batched_int8(QuantType::IQ4_XS, 48, hopper));  // a bf16 tile of the grouped kernel only
  EXPECT_FALSE(moe_batched_int8(QuantType::IQ4_XS, 64, hopper));
  EXPECT_FALSE(moe_batched_int8(QuantType::IQ4_XS, 16, h200));  // no sm_90a kernels
  MmqConfig c = select_mmq_config(QuantType::IQ4_XS, 32, 4096, 14336, h200, MmvqMath::kInt8);
  EXPECT_TRUE(c.int8);
  EXPECT_EQ(c.tokens_per_tile, 32);
  // per token and 256 weights: 256 codes and eight float32 scales
  EXPECT_EQ(c.activation_bytes, size_t{32} * (14336 / 256) * 288);
  // past 64 tokens the int8 tiles stay at 64 (two int32 fragment sets fit the registers there)
  c = select_mmq_config(QuantType::IQ2_XXS, 1000, 4096, 4096, h200, MmvqMath::kInt8);
  EXPECT_EQ(c.tokens_per_tile, 64);
  EXPECT_EQ(c.workspace_bytes(), size_t{1000} * 16 * 288 + c.partial_bytes);
  for (QuantType t : {QuantType::IQ1_S, QuantType::IQ2_XXS, QuantType::IQ3_XXS, QuantType::IQ3_S, QuantType::IQ4_NL,
                      QuantType::IQ4_XS, QuantType::Q5_0, QuantType::Q8_0, QuantType::MXFP4, QuantType::MXFP4_SPLIT})
    EXPECT_TRUE(mmq_int8_supported(t)) << type_name(t);
  // 16-weight scales (and MXFP8's float codes) keep the bf16 path; asking for int8 names the rule
  for (QuantType t : {QuantType::IQ1_M, QuantType::IQ2_XS, QuantType::IQ2_S, QuantType::MXFP8_E4M3}) {
    EXPECT_FALSE(mmq_int8_supported(t)) << type_name(t);
    try {
      select_mmq_config(t, 32, 4096, 4096, h200, MmvqMath::kInt8);
      ADD_FAILURE() << type_name(t) << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("math: \"int8\""), std::string::npos) << e.what();
    }
  }
}

// An H200's facts as cudaDeviceGetAttribute reports them.
constexpr DeviceFacts kH200{9, 0, 132, 232448, 233472};

MmvqKernel kernel_at(QuantType t, int64_t n, int64_t k, int64_t m, MmvqMath math = MmvqMath::kAuto) {
  return plan_mmvq_pass(t, m, n, k, kH200, math).kernel;
}

// The MMVQ routing the H200 runs (tests/cuda checks the device's own plan against this planner).
TEST(Plan, MmvqKernelsOnTheH200) {
  using K = MmvqKernel;
  EXPECT_EQ(kernel_at(QuantType::IQ4_XS, 4096, 14336, 1), K::kDp4a);
  EXPECT_EQ(kernel_at(QuantType::IQ4_XS, 4096, 14336, 2), K::kDp4a);
  EXPECT_EQ(kernel_at(QuantType::IQ4_XS, 4096, 14336, 3), K::kDp4a);
  EXPECT_EQ(kernel_at(QuantType::IQ4_XS, 4096, 14336, 4), K::kDp4a);
  EXPECT_EQ(kernel_at(QuantType::IQ4_XS, 4096, 14336, 5), K::kInt8TensorCores);
  EXPECT_EQ(kernel_at(QuantType::IQ4_XS, 4096, 14336, 8), K::kInt8TensorCores);
  EXPECT_EQ(kernel_at(QuantType::IQ4_XS, 4096, 14336, 9), K::kBf16TensorCores);
  EXPECT_EQ(kernel_at(QuantType::IQ4_XS, 4096, 14336, 1, MmvqMath::kBf16), K::kBf16TensorCores);
  EXPECT_EQ(kernel_at(QuantType::Q8_0, 4096, 14336, 4), K::kInt8TensorCores);
  EXPECT_EQ(kernel_at(QuantType::IQ3_S, 4096, 14336, 2), K::kInt8TensorCores);
  EXPECT_EQ(kernel_at(QuantType::MXFP8_E4M3, 4096, 14336, 1), K::kBf16TensorCores);
  // the lane kernel's activations exceed a block's shared memory: int8 tensor cores
  EXPECT_EQ(kernel_at(QuantType::IQ4_XS, 67, 131072, 2), K::kInt8TensorCores);
  EXPECT_EQ(kernel_at(QuantType::IQ4_XS, 67, 57344, 4), K::kInt8TensorCores);
  EXPECT_EQ(kernel_at(QuantType::IQ4_XS, 67, 28672, 4), K::kDp4a);
  // 48 KB blocks (a device whose facts are unknown): the lanes at K = 14336, four tokens, do not fit
  EXPECT_EQ(plan_mmvq_pass(QuantType::IQ4_XS, 4, 4096, 14336, DeviceFacts{9, 0, 132}).kernel, K::kInt8TensorCores);
}

TEST(Plan, LaunchShapeAndWorkspace) {
  const MmvqConfig one = plan_mmvq_pass(QuantType::IQ4_XS, 1, 4096, 14336, kH200);
  EXPECT_EQ(one.kernel_tokens, 1);
  EXPECT_EQ(one.blocks, 128u);  // 32 one-warp teams per block cover the 4096 rows in 128 blocks (<= one per SM)
  EXPECT_EQ(one.threads, 1024);
  EXPECT_EQ(one.threads % 32, 0);
  EXPECT_GT(one.shared_bytes, 14336);  // the quantized activations at least
  EXPECT_FALSE(one.int8_prologue);
  EXPECT_EQ(one.workspace_bytes, 0u);
  const MmvqConfig three = plan_mmvq_pass(QuantType::IQ4_XS, 3, 4096, 14336, kH200);
  EXPECT_EQ(three.kernel_tokens, 4);
  EXPECT_TRUE(three.int8_prologue);
  EXPECT_EQ(three.workspace_bytes, 14336u + 3 * 14336u);  // scales [K/32][8] floats, then [3][K] codes
  const MmvqConfig five = plan_mmvq_pass(QuantType::IQ2_S, 5, 4096, 14336, kH200);
  EXPECT_EQ(five.kernel, MmvqKernel::kInt8TensorCores);
  EXPECT_EQ(five.kernel_tokens, 8);
  EXPECT_EQ(five.blocks, 256u);  // 16-row tiles
  EXPECT_EQ(five.threads, 384);  // 12 warps of <= 5 units: 14 would not fit two blocks per SM
  const MmvqConfig bf16 = plan_mmvq_pass(QuantType::MXFP8_E4M3, 12, 4096, 14336, kH200);
  EXPECT_EQ(bf16.kernel_tokens, 16);
  EXPECT_EQ(bf16.math, MmvqMath::kBf16);
  EXPECT_EQ(bf16.workspace_bytes, 0u);
}

TEST(Plan, LinearPassesKernelsAndReasons) {
  const Plan two = plan_linear(QuantType::IQ4_XS, 20, 4096, 14336, kH200);
  EXPECT_EQ(two.kernel, DenseKernel::kMmvq);
  EXPECT_EQ(two.passes, 2);
  EXPECT_EQ(two.mmvq.tokens, 16);
  EXPECT_EQ(two.mmvq_last.tokens, 4);
  // one arithmetic for every pass: bf16 past eight tokens, also in the short last pass
  EXPECT_EQ(two.mmvq_last.kernel, MmvqKernel::kBf16TensorCores);
  EXPECT_EQ(two.workspace_bytes, 0u);
  EXPECT_NE(describe_plan(two).find("last bf16_tensor_cores"), std::string::npos) << describe_plan(two);

  const Plan one = plan_linear(QuantType::IQ4_XS, 3, 4096, 14336, kH200);
  EXPECT_EQ(one.passes, 1);
  EXPECT_EQ(one.workspace_bytes, one.mmvq.workspace_bytes);
  EXPECT_NE(one.reason.find("dp4a"), std::string::npos) << one.reason;

  const Plan big = plan_linear(QuantType::IQ2_XXS, 33, 4096, 14336, kH200);
  EXPECT_EQ(big.kernel, DenseKernel::kDequantMatmul);
  EXPECT_EQ(big.workspace_bytes, size_t{4096} * 14336 * 2);  // the bf16 weight execute writes

  PlanOptions options;
  options.kernel = DenseKernel::kMmvq;
  options.math = MmvqMath::kBf16;
  const Plan forced = plan_linear(QuantType::IQ2_XXS, 40, 4096, 14336, kH200, options);
  EXPECT_EQ(forced.kernel, DenseKernel::kMmvq);
  EXPECT_EQ(forced.passes, 3);
  EXPECT_NE(forced.reason.find("forced"), std::string::npos);
  EXPECT_EQ(plan_linear(QuantType::IQ2_XXS, 4, 4096, 14336, DeviceFacts{}).kernel, DenseKernel::kCpuReference);
}

TEST(Plan, CarriesSlotsForMmqAndMoe) {
  Plan p = plan_linear(QuantType::IQ4_XS, 1, 64, 256, kH200);
  EXPECT_EQ(p.mmq.tokens_per_tile, 0);  // an MMVQ plan carries no MMQ configuration
  DeviceFacts h200 = kH200;
  h200.mmq = true;
  p = plan_linear(QuantType::IQ4_XS, 64, 4096, 14336, h200);
  EXPECT_EQ(p.kernel, DenseKernel::kMmq);
  EXPECT_EQ(p.mmq.tokens_per_tile, 64);
  EXPECT_EQ(p.workspace_bytes, p.mmq.workspace_bytes());
  EXPECT_EQ(p.moe, nullptr);
  EXPECT_STREQ(operation_name(Operation::kMoe), "moe");
}

TEST(Plan, ErrorsNameTheArgument) {
  auto message = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  PlanOptions mmq;
  mmq.kernel = DenseKernel::kMmq;
  EXPECT_NE(message([&] {
              plan_linear(QuantType::IQ4_XS, 64, 64, 256, kH200, mmq);
            }).find("kernel: mmq needs a compute capability 9.0"),
            std::string::npos);
  PlanOptions mmvq;
  mmvq.kernel = DenseKernel::kMmvq;
  EXPECT_NE(message([&] { plan_linear(QuantType::IQ4_XS, 1, 64, 256, DeviceFacts{}, mmvq); }).find("needs a CUDA"),
            std::string::npos);
  EXPECT_NE(message([&] { plan_linear(QuantType::IQ4_XS, -1, 64, 256, kH200); }).find("m: M = -1 must be >= 0"),
            std::string::npos);
  EXPECT_EQ(plan_linear(QuantType::IQ4_XS, 0, 64, 256, kH200).passes, 0);  // an empty call runs nothing
  EXPECT_NE(message([&] { plan_linear(QuantType::IQ4_XS, 1, 64, 300, kH200); }).find("k: "), std::string::npos);
  EXPECT_NE(message([&] { plan_mmvq_pass(QuantType::IQ4_XS, 17, 64, 256, kH200); }).find("x: MMVQ takes 1 to 16"),
            std::string::npos);
  EXPECT_NE(message([&] { plan_mmvq_pass(QuantType::MXFP8_E4M3, 1, 64, 256, kH200, MmvqMath::kInt8); }).find("math:"),
            std::string::npos);
  EXPECT_THROW(plan_linear(QuantType::Q8_1, 1, 64, 256, kH200), Error);
}

// The tuning table: the rows the kernels compile against, each with where it was measured.
TEST(Tuning, RowsAndProvenance) {
  using tuning::lane_shape;
  EXPECT_EQ(lane_shape(QuantType::IQ4_XS, 1).rows, 1);
  EXPECT_FALSE(lane_shape(QuantType::IQ4_XS, 1).words);
  EXPECT_TRUE(lane_shape(QuantType::IQ3_S, 1, /*words=*/true).split_signs);
  EXPECT_FALSE(lane_shape(QuantType::IQ3_S, 1, /*words=*/false).split_signs);
  EXPECT_EQ(lane_shape(QuantType::IQ3_S, 2).rows, 0);   // tensor cores
  EXPECT_EQ(lane_shape(QuantType::Q5_0, 4).rows, 1);    // the catch-all row
  EXPECT_EQ(lane_shape(QuantType::IQ4_XS, 8).rows, 0);  // no lane kernel of eight tokens
  EXPECT_EQ(tuning::dequant_row(QuantType::IQ4_NL).groups, 1);
  EXPECT_TRUE(tuning::dequant_row(QuantType::IQ4_NL).via_int8);
  EXPECT_EQ(tuning::dequant_row(QuantType::IQ3_S).groups, 2);
  const tuning::Provenance* measured = nullptr;
  EXPECT_EQ(tuning::mmvq_max_tokens(QuantType::IQ1_M, 9, &measured), 32);
  ASSERT_NE(measured, nullptr);
  EXPECT_STREQ(measured->gpu, "H200");
  EXPECT_EQ(tuning::mmvq_max_tokens(QuantType::IQ1_M, 10, &measured), 8);
  EXPECT_EQ(measured, nullptr);
  for (const auto& row : tuning::sm90::kLaneRows)
    if (row.measured != nullptr) EXPECT_EQ(std::string(row.measured->date).size(), 10u);
  // every int8 MMQ row is a measured one, of a type the int8 path serves
  for (const auto& row : tuning::sm90::kMmqInt8Rows) {
    ASSERT_NE(row.measured, nullptr) << type_name(row.type);
    EXPECT_TRUE(mmq_int8_supported(row.type)) << type_name(row.type);
    EXPECT_LE(row.max_tile, cuda_detail::kMmqInt8MaxTile);
  }
}

}  // namespace
}  // namespace lowbit
