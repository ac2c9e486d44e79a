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
