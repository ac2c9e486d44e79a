// CPU reference decode throughput per type (Google Benchmark). The seed of lowbit's bundled
// microbenchmarks: GPU kernels get their own binary (bench_cuda.cpp) with the same naming.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "lowbit/cpu.h"
#include "lowbit/formats/common.h"
#include "lowbit/quant_type.h"

namespace {

// Random blocks with a realistic finite fp16 scale in every scale field the type has.
std::vector<uint8_t> random_weight(const lowbit::TypeInfo& t, int64_t rows, int64_t k, std::mt19937& rng) {
  const int64_t bytes = rows * (k / t.block_elems) * t.block_bytes;
  std::vector<uint8_t> w(static_cast<size_t>(bytes));
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  return w;
}

void BM_DequantizeF32(benchmark::State& state, lowbit::QuantType type) {
  const lowbit::TypeInfo& t = *lowbit::find_type(static_cast<int64_t>(type));
  const int64_t rows = 256, k = 4096;
  std::mt19937 rng(1234);
  std::vector<uint8_t> w = random_weight(t, rows, k, rng);
  std::vector<uint8_t> scales(static_cast<size_t>(rows * k / 32));
  for (auto& s : scales) s = static_cast<uint8_t>(110 + rng() % 30);
  std::vector<float> out(static_cast<size_t>(rows * k));
  lowbit::WeightView v;
  v.data = w.data();
  v.row_stride = k / t.block_elems * t.block_bytes;
  v.scales = t.split_scales ? scales.data() : nullptr;
  v.scale_row_stride = k / 32;
  for (auto _ : state) {
    lowbit::cpu::dequantize(type, v, rows, k, out.data(), lowbit::FloatType::F32, k);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * rows * k);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.size()));
  state.SetLabel(t.name);
}

int register_all() {
  for (const lowbit::TypeInfo& t : lowbit::all_types()) {
    if (!t.is_weight) continue;
    benchmark::RegisterBenchmark((std::string("cpu_dequantize_f32/") + t.name).c_str(), BM_DequantizeF32, t.type)
        ->Unit(benchmark::kMicrosecond);
  }
  return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
