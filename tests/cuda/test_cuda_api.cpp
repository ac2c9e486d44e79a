// lowbit's C++ CUDA API over raw device pointers: results against the CPU reference with outputs
// poisoned before each run, a non-default stream, and argument errors. Skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "../cpp/test_support.h"
#include "lowbit/cpu.h"
#include "lowbit/cuda.h"
#include "lowbit/cuda_mmq.h"
#include "lowbit/cuda_moe.h"
#include "lowbit/error.h"
#include "lowbit/formats/common.h"

namespace lowbit {
namespace {

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define REQUIRE_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device"

template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  // exact sizes: memcheck sees overruns
  explicit DeviceBuffer(size_t n) { EXPECT_EQ(cudaMalloc(&ptr, n * sizeof(T)), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(ptr); }
};

using test::error_message;
using test::random_weight;

class CudaApi : public ::testing::TestWithParam<QuantType> {};

// Dequantize and MMVQ (both arithmetics) of one shape against the CPU reference, every buffer
// allocated to its exact size so that compute-sanitizer sees any overrun.
void check_against_reference(QuantType t, int64_t n, int64_t k, int64_t m, std::mt19937& rng) {
  SCOPED_TRACE(::testing::Message() << "N = " << n << ", K = " << k << ", M = " << m);
  const TypeInfo& info = *find_type(static_cast<int64_t>(t));
  const auto w = random_weight(t, n, k, rng);
  std::vector<uint8_t> scales(static_cast<size_t>(n * k / 32));
  for (auto& s : scales) s = static_cast<uint8_t>(118 + rng() % 10);
  WeightView host{w.data(), row_bytes(t, k), 0, info.split_scales ? scales.data() : nullptr, k / 32, 0};
  std::vector<float> ref(n * k);
  cpu::dequantize(t, host, n, k, ref.data(), FloatType::F32, k);

  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  DeviceBuffer<uint8_t> dw(w.size()), ds(scales.size());
  DeviceBuffer<float> dout(n * k), dx(m * k), dy(m * n);
  // every copy and poison goes on `stream`: a non-blocking stream does not order itself after the
  // legacy default stream, so a plain cudaMemset could land after the kernel and erase its output
  cudaMemcpyAsync(dw.ptr, w.data(), w.size(), cudaMemcpyHostToDevice, stream);
  cudaMemcpyAsync(ds.ptr, scales.data(), scales.size(), cudaMemcpyHostToDevice, stream);
  WeightView dev{dw.ptr, row_bytes(t, k), 0, info.split_scales ? ds.ptr : nullptr, k / 32, 0};

  cudaMemsetAsync(dout.ptr, 0xFF, n * k * sizeof(float), stream);  // NaN poison
  cuda::dequantize(t, dev, n, k, dout.ptr, FloatType::F32, k, stream);
  std::vector<float> got(n * k);
  cudaMemcpyAsync(got.data(), dout.ptr, got.size() * sizeof(float), cudaMemcpyDeviceToHost, stream);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)), 0) << info.name;

  std::normal_distribution<float> normal;
  std::vector<float> x(m * k);
  for (auto& v : x) v = normal(rng);
  cudaMemcpyAsync(dx.ptr, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice, stream);
  std::vector<double> exact(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t c = 0; c < k; ++c) s += static_cast<double>(x[i * k + c]) * ref[j * k + c];
      exact[i * n + j] = s;
    }
  // y (poisoned first) read back after `run` and its relative error against the exact product
  auto relative_error = [&](auto run) {
    cudaMemsetAsync(dy.ptr, 0xFF, m * n * sizeof(float), stream);
    run();
    std::vector<float> y(m * n);
    cudaMemcpyAsync(y.data(), dy.ptr, y.size() * sizeof(float), cudaMemcpyDeviceToHost, stream);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < m * n; ++i) {
      EXPECT_TRUE(std::isfinite(y[i])) << info.name << " y[" << i << "] not written";
      diff += (y[i] - exact[i]) * (y[i] - exact[i]);
      norm += exact[i] * exact[i];
    }
    return std::sqrt(diff / norm);
  };
  // bf16: activations and weights rounded to bf16; int8: activations to 8 bits per 32, whose
  // error averages out less over a short K (the Python tests' bound for one-block K)
  auto bound = [&](MmvqMath math) { return math == MmvqMath::kInt8 && k < 1024 ? 3e-2 : 1e-2; };
  for (MmvqMath math : {MmvqMath::kBf16, MmvqMath::kInt8}) {
    if (math == MmvqMath::kInt8 && !mmvq_int8_supported(t, m)) continue;
    const double err =
        relative_error([&] { cuda::mmvq(t, dev, n, k, dx.ptr, FloatType::F32, m, k, dy.ptr, n, stream, math); });
    EXPECT_LT(err, bound(math)) << info.name << " " << mmvq_math_name(math);
  }
  // the same product through the plan and execute, with the workspace the plan asks for
  PlanOptions forced;
  forced.kernel = DenseKernel::kMmvq;
  const Plan plan = cuda::plan_linear(t, m, n, k, forced);
  DeviceBuffer<uint8_t> ws(plan.workspace_bytes > 0 ? plan.workspace_bytes : 1);
  const double err = relative_error([&] {
    cuda::execute(plan, dev, dx.ptr, FloatType::F32, k, dy.ptr, n, plan.workspace_bytes > 0 ? ws.ptr : nullptr,
                  plan.workspace_bytes, stream);
  });
  EXPECT_LT(err, bound(plan.mmvq.math)) << describe_plan(plan);
  cudaStreamDestroy(stream);
}

TEST_P(CudaApi, DequantizeAndMmvqMatchTheCpuReference) {
  REQUIRE_GPU();
  const QuantType t = GetParam();
  std::mt19937 rng(std::random_device{}());
  check_against_reference(t, 45, 1024, 5, rng);
  // whole tiles only: the last tile's last unit is the one whose aligned span passes the tensor's end
  check_against_reference(t, 32, 1024, 2, rng);
  // A short last 256-weight unit (five 32-weight blocks, or one 256-weight block) with the tile's
  // rows cut at 17: at M = 1 and 3 the int8 kernel's last fragment has columns past the unit's end.
  const int64_t short_k = find_type(static_cast<int64_t>(t))->block_elems == 32 ? 160 : 256;
  check_against_reference(t, 17, short_k, 1, rng);
  check_against_reference(t, 17, short_k, 3, rng);
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, CudaApi,
                         ::testing::Values(QuantType::Q5_0, QuantType::Q8_0, QuantType::IQ2_XXS, QuantType::IQ2_XS,
                                           QuantType::IQ3_XXS, QuantType::IQ1_S, QuantType::IQ4_NL, QuantType::IQ3_S,
                                           QuantType::IQ2_S, QuantType::IQ4_XS, QuantType::IQ1_M, QuantType::MXFP4,
                                           QuantType::MXFP8_E4M3, QuantType::MXFP4_SPLIT),
                         [](const auto& info) { return std::string(type_name(info.param)); });

// Which kernel serves which call on this device (the same choice mmvq makes).
TEST(CudaApiKernels, MmvqKernelChoice) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  using K = cuda::MmvqKernel;
  EXPECT_EQ(cuda::mmvq_kernel(QuantType::IQ4_XS, 4096, 14336, 1), K::kDp4a);
  EXPECT_EQ(cuda::mmvq_kernel(QuantType::IQ4_XS, 4096, 14336, 2), K::kDp4a);
  EXPECT_EQ(cuda::mmvq_kernel(QuantType::IQ4_XS, 4096, 14336, 3), K::kDp4a);
  EXPECT_EQ(cuda::mmvq_kernel(QuantType::IQ4_XS, 4096, 14336, 4), K::kDp4a);
  EXPECT_EQ(cuda::mmvq_kernel(QuantType::IQ4_XS, 4096, 14336, 5), K::kInt8TensorCores);
  EXPECT_EQ(cuda::mmvq_kernel(QuantType::Q8_0, 4096, 14336, 4), K::kInt8TensorCores);
  EXPECT_EQ(cuda::mmvq_kernel(QuantType::IQ4_XS, 4096, 14336, 8), K::kInt8TensorCores);
  EXPECT_EQ(cuda::mmvq_kernel(QuantType::IQ4_XS, 4096, 14336, 9), K::kBf16TensorCores);
  EXPECT_EQ(cuda::mmvq_kernel(QuantType::IQ4_XS, 4096, 14336, 1, MmvqMath::kBf16), K::kBf16TensorCores);
  EXPECT_EQ(cuda::mmvq_kernel(QuantType::IQ3_S, 4096, 14336, 2), K::kInt8TensorCores);
  EXPECT_EQ(cuda::mmvq_kernel(QuantType::MXFP8_E4M3, 4096, 14336, 1), K::kBf16TensorCores);
  // two tokens' int8 activations at K = 131072 (294 KB) fit no block's shared memory, nor four
  // tokens' at K = 57344 (258 KB)
  EXPECT_EQ(cuda::mmvq_kernel(QuantType::IQ4_XS, 67, 131072, 2), K::kInt8TensorCores);
  EXPECT_EQ(cuda::mmvq_kernel(QuantType::IQ4_XS, 67, 57344, 4), K::kInt8TensorCores);
  EXPECT_EQ(cuda::mmvq_kernel(QuantType::IQ4_XS, 67, 28672, 4), K::kDp4a);
  // the workspace is read where the int8 prologue runs: tensor cores, dp4a at three or four tokens
  EXPECT_FALSE(cuda::mmvq_reads_workspace(QuantType::IQ4_XS, 4096, 14336, 1));
  EXPECT_FALSE(cuda::mmvq_reads_workspace(QuantType::IQ4_XS, 4096, 14336, 2));
  EXPECT_TRUE(cuda::mmvq_reads_workspace(QuantType::IQ4_XS, 4096, 14336, 3));
  EXPECT_TRUE(cuda::mmvq_reads_workspace(QuantType::IQ4_XS, 4096, 14336, 8));
  EXPECT_TRUE(cuda::mmvq_reads_workspace(QuantType::IQ3_S, 4096, 14336, 2));
  EXPECT_FALSE(cuda::mmvq_reads_workspace(QuantType::IQ4_XS, 4096, 14336, 4, MmvqMath::kBf16));
  EXPECT_FALSE(cuda::mmvq_reads_workspace(QuantType::MXFP8_E4M3, 4096, 14336, 4));
}

// The plan a CUDA call runs is the pure planner's for this device's facts, and the former queries
// report it.
TEST(CudaApiKernels, PlanIsThePurePlannersForTheDevice) {
  REQUIRE_GPU();
  const DeviceFacts facts = cuda::device_facts();
  EXPECT_GT(facts.shared_per_block_optin, 0);
  for (QuantType t : {QuantType::IQ4_XS, QuantType::IQ3_S, QuantType::Q8_0, QuantType::MXFP8_E4M3})
    for (int64_t m : {1, 2, 3, 4, 8, 9, 16, 24}) {
      const Plan here = cuda::plan_linear(t, m, 4096, 14336);
      const Plan pure = plan_linear(t, m, 4096, 14336, facts);
      EXPECT_EQ(describe_plan(here), describe_plan(pure));
      if (m <= kMmvqMaxTokens && here.kernel == DenseKernel::kMmvq) {
        EXPECT_EQ(cuda::mmvq_kernel(t, 4096, 14336, m), here.mmvq.kernel);
        EXPECT_EQ(cuda::mmvq_reads_workspace(t, 4096, 14336, m), here.workspace_bytes > 0);
      }
    }
}

// Two passes (16 + 4 tokens) and the dequant_matmul plan's bf16 weight, through execute.
TEST(CudaApiKernels, ExecuteRunsEveryPassAndTheDequantStep) {
  REQUIRE_GPU();
  std::mt19937 rng(std::random_device{}());
  const QuantType t = QuantType::IQ4_XS;
  const int64_t n = 45, k = 1024, m = 20;
  const auto w = test::random_weight(t, n, k, rng);
  std::vector<float> ref(n * k);
  WeightView host{w.data(), row_bytes(t, k), 0, nullptr, 0, 0};
  cpu::dequantize(t, host, n, k, ref.data(), FloatType::F32, k);
  std::normal_distribution<float> normal;
  std::vector<float> x(m * k);
  for (auto& v : x) v = normal(rng);
  DeviceBuffer<uint8_t> dw(w.size());
  DeviceBuffer<float> dx(m * k), dy(m * n);
  cudaMemcpy(dw.ptr, w.data(), w.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dx.ptr, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(dy.ptr, 0xFF, m * n * sizeof(float));
  const WeightView dev{dw.ptr, row_bytes(t, k), 0, nullptr, 0, 0};
  PlanOptions forced;
  forced.kernel = DenseKernel::kMmvq;
  const Plan plan = cuda::plan_linear(t, m, n, k, forced);
  ASSERT_EQ(plan.passes, 2);
  EXPECT_EQ(plan.mmvq.tokens, 16);
  EXPECT_EQ(plan.mmvq_last.tokens, 4);
  cuda::execute(plan, dev, dx.ptr, FloatType::F32, k, dy.ptr, n, nullptr, 0, nullptr);
  std::vector<float> y(m * n);
  ASSERT_EQ(cudaMemcpy(y.data(), dy.ptr, y.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double e = 0;
      for (int64_t c = 0; c < k; ++c) e += static_cast<double>(x[i * k + c]) * ref[j * k + c];
      ASSERT_TRUE(std::isfinite(y[i * n + j])) << "row " << i << " not written";
      diff += (y[i * n + j] - e) * (y[i * n + j] - e);
      norm += e * e;
    }
  EXPECT_LT(std::sqrt(diff / norm), 1e-2);

  forced.kernel = DenseKernel::kDequantMatmul;
  const Plan dq = cuda::plan_linear(t, m, n, k, forced);
  ASSERT_EQ(dq.workspace_bytes, static_cast<size_t>(n * k * 2));
  DeviceBuffer<uint16_t> bf16(n * k);
  cuda::execute(dq, dev, dx.ptr, FloatType::F32, k, dy.ptr, n, bf16.ptr, dq.workspace_bytes, nullptr);
  std::vector<uint16_t> got(n * k);
  ASSERT_EQ(cudaMemcpy(got.data(), bf16.ptr, got.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int64_t i = 0; i < n * k; ++i) {
    uint32_t bits = static_cast<uint32_t>(got[i]) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    ASSERT_NEAR(v, ref[i], std::fabs(ref[i]) / 128 + 1e-30) << "element " << i;
  }
  EXPECT_NE(error_message([&] {
              cuda::execute(dq, dev, dx.ptr, FloatType::F32, k, dy.ptr, n, nullptr, 0, nullptr);
            }).find("workspace"),
            std::string::npos);
}

// bf16 bits of v, rounded to nearest even (v finite)
uint16_t to_bf16(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
float from_bf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

// The vector MoE projection through both entry points (the table of local experts from
// moe_pair_experts, and the router's ids read by the kernel): the same bits, exact zeros for the
// pairs without a local expert (ids -1, below the rank's first expert, past its last), and the
// others within the int8 activations' bound of the float64 product. Outputs poisoned first.
TEST(CudaApiMoe, VectorProjectionOverIdsAndOverTheExpertTable) {
  REQUIRE_GPU();
  const QuantType t = QuantType::IQ4_XS;
  const int64_t experts = 5, n = 40, k = 512, tokens = 3, top_k = 3, pairs = tokens * top_k, begin = 2;
  std::mt19937 rng(20261201);
  const auto w = random_weight(t, experts * n, k, rng);
  std::vector<float> dequantized(experts * n * k);
  WeightView host{w.data(), row_bytes(t, k), n * row_bytes(t, k), nullptr, 0, 0};
  cpu::dequantize(t, host, experts * n, k, dequantized.data(), FloatType::F32, k);
  std::normal_distribution<float> normal;
  std::vector<uint16_t> x(tokens * k);
  for (auto& v : x) v = to_bf16(normal(rng));
  // valid ids begin .. begin + E - 1, and -1, begin - 1, begin + E
  const std::vector<int32_t> ids = {3, 6, -1, 2, 1, 4, 7, 5, 2};
  std::vector<double> exact(pairs * n, 0.0);
  std::vector<bool> local(pairs);
  for (int64_t p = 0; p < pairs; ++p) {
    const int64_t e = ids[p] - begin;
    local[p] = ids[p] >= 0 && e >= 0 && e < experts;
    if (!local[p]) continue;
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t c = 0; c < k; ++c)
        s += static_cast<double>(from_bf16(x[p / top_k * k + c])) * dequantized[(e * n + j) * k + c];
      exact[p * n + j] = s;
    }
  }

  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  DeviceBuffer<uint8_t> dw(w.size());
  DeviceBuffer<uint16_t> dx(x.size());
  DeviceBuffer<int32_t> dids(ids.size()), dtable(ids.size());
  DeviceBuffer<float> dy(pairs * n);
  cudaMemcpyAsync(dw.ptr, w.data(), w.size(), cudaMemcpyHostToDevice, stream);
  cudaMemcpyAsync(dx.ptr, x.data(), x.size() * 2, cudaMemcpyHostToDevice, stream);
  cudaMemcpyAsync(dids.ptr, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice, stream);
  cuda::MoeProjection proj;
  proj.type = t;
  proj.w = WeightView{dw.ptr, row_bytes(t, k), n * row_bytes(t, k), nullptr, 0, 0};
  proj.experts = experts;
  proj.n = n;
  proj.k = k;
  proj.x = dx.ptr;
  proj.x_row_stride = k;
  proj.x_pair_divisor = top_k;
  proj.pairs = pairs;
  proj.y = dy.ptr;
  proj.y_row_stride = n;
  const size_t ws_bytes = cuda::moe_vec_workspace_bytes(proj);
  DeviceBuffer<uint8_t> ws(ws_bytes > 0 ? ws_bytes : 1);
  auto run = [&](auto launch) {
    cudaMemsetAsync(dy.ptr, 0xFF, pairs * n * sizeof(float), stream);  // NaN poison
    launch();
    std::vector<float> y(pairs * n);
    cudaMemcpyAsync(y.data(), dy.ptr, y.size() * sizeof(float), cudaMemcpyDeviceToHost, stream);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    return y;
  };
  const auto by_table = run([&] {
    cuda::moe_pair_experts({dids.ptr, false}, pairs, experts, begin, dtable.ptr, stream);
    cuda::moe_vec(proj, dtable.ptr, ws.ptr, ws_bytes, stream);
  });
  const auto by_ids =
      run([&] { cuda::moe_vec(proj, cuda::ExpertIds{dids.ptr, false}, begin, ws.ptr, ws_bytes, stream); });
  EXPECT_EQ(std::memcmp(by_table.data(), by_ids.data(), by_ids.size() * sizeof(float)), 0);
  double diff = 0, norm = 0;
  for (int64_t p = 0; p < pairs; ++p)
    for (int64_t j = 0; j < n; ++j) {
      const float v = by_ids[p * n + j];
      if (!local[p]) {
        EXPECT_EQ(v, 0.0f) << "pair " << p << " row " << j;
        continue;
      }
      EXPECT_TRUE(std::isfinite(v)) << "pair " << p << " row " << j << " not written";
      diff += (v - exact[p * n + j]) * (v - exact[p * n + j]);
      norm += exact[p * n + j] * exact[p * n + j];
    }
  EXPECT_LT(std::sqrt(diff / norm), 3e-2);  // int8 activations per 32 values over K = 512

  // y in bf16: the float32 result rounded once (to nearest even), every element written
  DeviceBuffer<uint16_t> dyb(pairs * n);
  cudaMemsetAsync(dyb.ptr, 0xFF, pairs * n * 2, stream);  // NaN poison
  cuda::MoeProjection proj_bf16 = proj;
  proj_bf16.y = dyb.ptr;
  proj_bf16.y_type = FloatType::BF16;
  cuda::moe_vec(proj_bf16, cuda::ExpertIds{dids.ptr, false}, begin, ws.ptr, ws_bytes, stream);
  std::vector<uint16_t> yb(pairs * n);
  cudaMemcpyAsync(yb.data(), dyb.ptr, yb.size() * 2, cudaMemcpyDeviceToHost, stream);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  for (int64_t i = 0; i < pairs * n; ++i) EXPECT_EQ(yb[i], to_bf16(by_ids[i])) << "element " << i;
  // an output type that does not exist is named (test_moe_cuda.py checks the batched kernel's
  // bf16 / fp16 outputs against its float32 one)
  cuda::MoeProjection proj_bad = proj;
  proj_bad.y_type = static_cast<FloatType>(7);
  cuda::MoeRouting routing;
  EXPECT_NE(error_message([&] { cuda::moe_batched(proj_bad, routing, stream); }).find("y_type: must be"),
            std::string::npos);
  cudaStreamDestroy(stream);
}

// MMQ's int8 path (math auto for IQ4_XS at 20 tokens) reads activations at any address and row
// stride: x one bf16 element past an aligned address, rows K + 1 elements apart. And moe_batched
// with no pairs on routing blocks the int8 path serves is a no-op, not an error.
TEST(CudaApiMmq, Int8PathTakesUnalignedActivationsAndNoPairs) {
  REQUIRE_GPU();
  if (!cuda::mmq_available()) GTEST_SKIP() << "MMQ needs a compute capability 9.0 GPU and a build for sm_90a";
  const QuantType t = QuantType::IQ4_XS;
  const int64_t n = 200, k = 512, m = 20, stride = k + 1;
  ASSERT_TRUE(cuda::mmq_config(t, m, n, k).int8);
  std::mt19937 rng(20261202);
  const auto w = random_weight(t, n, k, rng);
  std::vector<float> dequantized(n * k);
  cpu::dequantize(t, WeightView{w.data(), row_bytes(t, k), 0, nullptr, 0, 0}, n, k, dequantized.data(), FloatType::F32,
                  k);
  std::normal_distribution<float> normal;
  std::vector<uint16_t> x(1 + m * stride);
  for (auto& v : x) v = to_bf16(normal(rng));

  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  DeviceBuffer<uint8_t> dw(w.size());
  DeviceBuffer<uint16_t> dx(x.size());
  DeviceBuffer<float> dy(m * n);
  cudaMemcpyAsync(dw.ptr, w.data(), w.size(), cudaMemcpyHostToDevice, stream);
  cudaMemcpyAsync(dx.ptr, x.data(), x.size() * 2, cudaMemcpyHostToDevice, stream);
  cudaMemsetAsync(dy.ptr, 0xFF, m * n * sizeof(float), stream);  // NaN poison
  cuda::mmq(t, WeightView{dw.ptr, row_bytes(t, k), 0, nullptr, 0, 0}, n, k, dx.ptr + 1, FloatType::BF16, m, stride,
            dy.ptr, FloatType::F32, n, stream);
  std::vector<float> y(m * n);
  cudaMemcpyAsync(y.data(), dy.ptr, y.size() * sizeof(float), cudaMemcpyDeviceToHost, stream);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  double diff = 0, norm = 0;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0;
      for (int64_t c = 0; c < k; ++c)
        exact += static_cast<double>(from_bf16(x[1 + r * stride + c])) * dequantized[j * k + c];
      ASSERT_TRUE(std::isfinite(y[r * n + j])) << "row " << r << " output " << j << " not written";
      diff += (y[r * n + j] - exact) * (y[r * n + j] - exact);
      norm += exact * exact;
    }
  EXPECT_LT(std::sqrt(diff / norm), 3e-2);  // int8 activations per 32 values

  const int64_t experts = 4;
  cuda::MoeProjection proj;
  proj.type = t;
  proj.w = WeightView{dw.ptr, row_bytes(t, k), 50 * row_bytes(t, k), nullptr, 0, 0};
  proj.experts = experts;
  proj.n = 50;
  proj.k = k;
  proj.x = dx.ptr;  // aligned; never read without pairs
  proj.x_row_stride = k;
  proj.pairs = 0;
  proj.y = dy.ptr;
  proj.y_row_stride = 50;
  for (cuda::MoeProjection p : {proj, [&] {
                                  cuda::MoeProjection q = proj;
                                  q.math = MmvqMath::kInt8;
                                  return q;
                                }()}) {
    const int block = 16;
    const int64_t capacity = moe_sorted_capacity(0, experts, block);
    DeviceBuffer<int32_t> sorted(capacity), blocks((capacity + block - 1) / block), padded(1);
    cuda::MoeRouting routing{sorted.ptr, capacity, blocks.ptr, (capacity + block - 1) / block,
                             padded.ptr, nullptr,  block};
    EXPECT_EQ(error_message([&] { cuda::moe_batched(p, routing, stream); }), "no error");
  }
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaStreamDestroy(stream);
}

TEST(CudaApiErrors, NameTheArgument) {
  // argument checks run before any device work, so they hold without a GPU too
  alignas(16) static uint8_t w[136 * 4];
  alignas(16) static float x[16 * 256], y[16 * 4];
  const WeightView v{w, 136, 0, nullptr, 0, 0};
  EXPECT_NE(error_message([&] {
              cuda::mmvq(QuantType::IQ4_XS, v, 4, 256, x, FloatType::F32, 17, 256, y, 4, nullptr);
            }).find("x: MMVQ takes 1 to 16 tokens, got M = 17"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              cuda::mmvq(QuantType::IQ4_XS, v, 4, 300, x, FloatType::F32, 1, 300, y, 4, nullptr);
            }).find("k: K = 300"),
            std::string::npos);
  const WeightView odd_stride{w, 140, 0, nullptr, 0, 0};  // IQ4_XS blocks are read 8-byte aligned
  EXPECT_NE(error_message([&] {
              cuda::mmvq(QuantType::IQ4_XS, odd_stride, 3, 256, x, FloatType::F32, 1, 256, y, 3, nullptr);
            }).find("w: row stride 140 must be a multiple of 8 bytes"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              cuda::dequantize(QuantType::IQ4_XS, odd_stride, 3, 256, y, FloatType::F32, 256, nullptr);
            }).find("w: row stride 140 must be a multiple of 8 bytes"),
            std::string::npos);
  const WeightView off{w + 2, 136, 0, nullptr, 0, 0};
  EXPECT_NE(error_message([&] {
              cuda::mmvq(QuantType::IQ4_XS, off, 4, 256, x, FloatType::F32, 1, 256, y, 4, nullptr);
            }).find("w: data must be 16-byte aligned"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              cuda::mmvq(QuantType::IQ4_XS, v, 4, 256, x, FloatType::F32, 9, 256, y, 4, nullptr, MmvqMath::kInt8);
            }).find("math: int8 MMVQ serves M <= 8"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              cuda::mmvq(QuantType::IQ4_XS, v, 4, 256, x, FloatType::F32, 2, 256, x + 300, 4, nullptr);
            }).find("y: must not overlap x"),
            std::string::npos);
  EXPECT_EQ(error_message([&] {
              cuda::mmvq(QuantType::IQ4_XS, v, 4, 256, x, FloatType::F32, 2, 256, x + 512, 4, nullptr, MmvqMath::kAuto,
                         y, 100);
            }).find("y: must not overlap x"),
            std::string::npos);  // y just past x's two rows: the next check (workspace) speaks
  EXPECT_NE(error_message([&] { cuda::mmvq_kernel(QuantType::IQ4_XS, 4, 300, 1); }).find("k: K = 300"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              cuda::mmvq_kernel(QuantType::IQ4_XS, 4, 256, 17);
            }).find("x: MMVQ takes 1 to 16 tokens, got M = 17"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              cuda::mmvq_kernel(QuantType::MXFP8_E4M3, 4, 256, 1, MmvqMath::kInt8);
            }).find("math: int8 MMVQ serves M <= 8"),
            std::string::npos);
  EXPECT_STREQ(cuda::mmvq_kernel_name(cuda::MmvqKernel::kDp4a), "dp4a");
  EXPECT_STREQ(cuda::mmvq_kernel_name(cuda::MmvqKernel::kInt8TensorCores), "int8_tensor_cores");
  EXPECT_STREQ(cuda::mmvq_kernel_name(cuda::MmvqKernel::kBf16TensorCores), "bf16_tensor_cores");
  EXPECT_EQ(cuda::mmvq_workspace_bytes(QuantType::IQ4_XS, 2, 256), 256u + 2 * 256u);
  EXPECT_EQ(cuda::mmvq_workspace_bytes(QuantType::IQ4_XS, 2, 256, MmvqMath::kBf16), 0u);
  EXPECT_NE(error_message([&] {
              cuda::mmvq(QuantType::IQ4_XS, v, 4, 256, x, FloatType::F32, 2, 256, y, 4, nullptr, MmvqMath::kAuto, y,
                         100);
            }).find("workspace: 100 bytes is less than the 768 bytes"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              cuda::dequantize(QuantType::Q8_1, v, 4, 32, y, FloatType::F32, 32, nullptr);
            }).find("activation format"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              cuda::dequantize(QuantType::MXFP8_E4M3, v, 4, 32, y, FloatType::F32, 32, nullptr);
            }).find("scales:"),
            std::string::npos);
}

}  // namespace
}  // namespace lowbit
