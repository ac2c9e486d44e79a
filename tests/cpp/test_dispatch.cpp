// The dispatcher's policy: pure functions over measured thresholds.
#include <gtest/gtest.h>

#include "lowbit/dispatch.h"
#include "lowbit/error.h"

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

}  // namespace
}  // namespace lowbit
