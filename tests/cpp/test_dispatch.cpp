// The dispatcher's policy: pure functions over measured thresholds.
#include <gtest/gtest.h>

#include "lowbit/dispatch.h"
#include "lowbit/error.h"
#include "lowbit/mmq_policy.h"

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
  EXPECT_EQ(select_dense(QuantType::IQ4_XS, 16, 4096, 14336, h200).kernel, DenseKernel::kMmvq);
  EXPECT_EQ(select_dense(QuantType::IQ4_XS, 17, 4096, 14336, h200).kernel, DenseKernel::kMmq);
  EXPECT_EQ(select_dense(QuantType::IQ1_M, 128, 4096, 14336, h200).kernel, DenseKernel::kMmq);
  EXPECT_EQ(select_dense(QuantType::IQ4_XS, 129, 4096, 14336, h200).kernel, DenseKernel::kDequantMatmul);
  const DeviceFacts no_mmq{9, 0, 132};  // a build without sm_90a kernels
  EXPECT_NE(select_dense(QuantType::IQ4_XS, 64, 4096, 14336, no_mmq).kernel, DenseKernel::kMmq);
  DeviceFacts a100{8, 0, 108};
  a100.mmq = true;  // never claimed on other architectures, but the policy must not trust it
  EXPECT_NE(select_dense(QuantType::IQ4_XS, 64, 4096, 14336, a100).kernel, DenseKernel::kMmq);
}

TEST(MmqPolicy, TilesSplitsAndWorkspace) {
  const DeviceFacts h200{9, 0, 132};
  // 32 row tiles of one 16-token tile: two blocks per multiprocessor leave room for 8 splits
  MmqConfig c = select_mmq_config(QuantType::IQ4_XS, 16, 4096, 14336, h200);
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

}  // namespace
}  // namespace lowbit
