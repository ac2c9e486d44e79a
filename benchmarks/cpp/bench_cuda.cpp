// lowbit's C++ CUDA API timed with CUDA events (Google Benchmark, manual time): dequantize to
// bf16 and MMVQ per type at the anchor shape N=4096, K=14336. Weights rotate through >= 256 MB.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "lowbit/cuda.h"
#include "lowbit/formats/common.h"

namespace {

constexpr int64_t kN = 4096, kK = 14336;
constexpr size_t kRotationBytes = size_t{288} << 20;

struct DeviceWeights {
  std::vector<uint8_t*> copies;
  uint8_t* scales = nullptr;
  int64_t row_bytes = 0;
  DeviceWeights(lowbit::QuantType t) {
    const lowbit::TypeInfo& info = *lowbit::find_type(static_cast<int64_t>(t));
    row_bytes = lowbit::row_bytes(t, kK);
    std::vector<uint8_t> host(static_cast<size_t>(kN * row_bytes));
    std::mt19937 rng(7);
    for (auto& b : host) b = static_cast<uint8_t>(rng());
    if (!info.split_scales && t != lowbit::QuantType::IQ1_M && t != lowbit::QuantType::MXFP4)
      for (size_t i = 0; i < host.size(); i += info.block_bytes) {
        const uint16_t d = lowbit::float_to_fp16(2e-3f);
        std::memcpy(&host[i], &d, 2);
      }
    const size_t n = std::max<size_t>(2, kRotationBytes / host.size() + 1);
    for (size_t i = 0; i < n; ++i) {
      uint8_t* p = nullptr;
      cudaMalloc(&p, host.size());
      cudaMemcpy(p, host.data(), host.size(), cudaMemcpyHostToDevice);
      copies.push_back(p);
    }
    std::vector<uint8_t> s(static_cast<size_t>(kN * kK / 32), 120);
    cudaMalloc(&scales, s.size());
    cudaMemcpy(scales, s.data(), s.size(), cudaMemcpyHostToDevice);
  }
  ~DeviceWeights() {
    for (auto* p : copies) cudaFree(p);
    cudaFree(scales);
  }
  lowbit::WeightView view(size_t i) const {
    return lowbit::WeightView{copies[i % copies.size()], row_bytes, 0, scales, kK / 32, 0};
  }
};

template <class Launch>
void timed(benchmark::State& state, const DeviceWeights& w, Launch launch) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  size_t i = 0;
  launch(w.view(i++));  // warm-up
  for (auto _ : state) {
    cudaEventRecord(start);
    launch(w.view(i++));
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(ms * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

void BM_Dequantize(benchmark::State& state, lowbit::QuantType t) {
  DeviceWeights w(t);
  uint16_t* out = nullptr;
  cudaMalloc(&out, static_cast<size_t>(kN * kK) * 2);
  timed(state, w, [&](const lowbit::WeightView& v) {
    lowbit::cuda::dequantize(t, v, kN, kK, out, lowbit::FloatType::BF16, kK, nullptr);
  });
  state.counters["rw_GBps"] = benchmark::Counter(static_cast<double>(kN * w.row_bytes + kN * kK * 2),
                                                 benchmark::Counter::kIsIterationInvariantRate);
  cudaFree(out);
}

void BM_Mmvq(benchmark::State& state, lowbit::QuantType t) {
  const int64_t m = state.range(0);
  DeviceWeights w(t);
  uint16_t *x = nullptr, *y = nullptr;
  cudaMalloc(&x, static_cast<size_t>(m * kK) * 2);
  cudaMalloc(&y, static_cast<size_t>(m * kN) * 2);
  std::vector<uint16_t> hx(static_cast<size_t>(m * kK), lowbit::float_to_bf16(0.5f));
  cudaMemcpy(x, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice);
  timed(state, w, [&](const lowbit::WeightView& v) {
    lowbit::cuda::mmvq(t, v, kN, kK, x, lowbit::FloatType::BF16, m, kK, y, kN, nullptr);
  });
  state.counters["weight_GBps"] =
      benchmark::Counter(static_cast<double>(kN * w.row_bytes), benchmark::Counter::kIsIterationInvariantRate);
  cudaFree(x);
  cudaFree(y);
}

int register_all() {
  for (const lowbit::TypeInfo& t : lowbit::all_types()) {
    if (!t.is_weight) continue;
    benchmark::RegisterBenchmark((std::string("cuda_dequantize_bf16/") + t.name).c_str(), BM_Dequantize, t.type)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string("cuda_mmvq_bf16/") + t.name).c_str(), BM_Mmvq, t.type)
        ->ArgName("M")
        ->Arg(1)
        ->Arg(4)
        ->Arg(16)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
  return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
