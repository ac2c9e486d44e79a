// The fused MoE layer's elementwise kernels: rounding the activations to bf16 once, and the top-k
// weighted combine (a fixed summation order per token: deterministic, no atomics).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/common/dropped_rows.cuh"
#include "cuda/common/launch.h"
#include "cuda/moe/moe_routing_launch.h"

namespace lowbit::cuda_detail {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);
}

template <class T>
__device__ __forceinline__ float load_float(const T* p) {
  if constexpr (sizeof(T) == 4)
    return *p;
  else
    return static_cast<float>(*p);
}

template <class T>
__device__ __forceinline__ void store_float(T* p, float v) {
  if constexpr (sizeof(T) == 4)
    *p = v;
  else if constexpr (std::is_same_v<T, __half>)
    *p = __float2half_rn(v);
  else
    *p = __float2bfloat16_rn(v);
}

constexpr int kZeroPairsPerBlock = 8;

// Block b: the dropped rows among pairs [8 b, 8 b + 8), its threads across the columns.
__global__ void __launch_bounds__(kThreads) zero_dropped_rows_kernel(const int32_t* slots, int64_t pairs, void* y,
                                                                     FloatType type, int64_t row_stride, int64_t n) {
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kZeroPairsPerBlock;
  const int64_t last = first + kZeroPairsPerBlock < pairs ? first + kZeroPairsPerBlock : pairs;
  zero_dropped_rows(lane_pair_dropped(slots, first, last), slots, first, last, y, type, row_stride, n, threadIdx.x,
                    kThreads);
}

template <class In>
__global__ void round_to_bf16_kernel(const In* x, int64_t tokens, int64_t hidden, int64_t x_row_stride,
                                     __nv_bfloat16* out) {
  const int64_t n = tokens * hidden;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t t = i / hidden, h = i - t * hidden;
    out[i] = __float2bfloat16_rn(load_float(x + t * x_row_stride + h));
  }
}

template <class Out>
__global__ void combine_kernel(const float* down, const float* weights, PairExperts experts, int64_t tokens,
                               int64_t top_k, int64_t hidden, Out* out) {
  const int64_t n = tokens * hidden;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t t = i / hidden, h = i - t * hidden;
    float sum = 0.0f;
    for (int64_t j = 0; j < top_k; ++j) {
      const int64_t pair = t * top_k + j;
      if (experts.of(pair) >= 0) sum = fmaf(weights[pair], down[pair * hidden + h], sum);
    }
    store_float(out + i, sum);
  }
}

}  // namespace

void launch_round_to_bf16(const void* x, FloatType x_type, int64_t tokens, int64_t hidden, int64_t x_row_stride,
                          uint16_t* out, cudaStream_t stream) {
  if (tokens * hidden == 0) return;
  auto* o = reinterpret_cast<__nv_bfloat16*>(out);
  const unsigned grid = grid_for(tokens * hidden);
  switch (x_type) {
    case FloatType::F32:
      round_to_bf16_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const float*>(x), tokens, hidden, x_row_stride,
                                                          o);
      break;
    case FloatType::F16:
      round_to_bf16_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const __half*>(x), tokens, hidden, x_row_stride,
                                                          o);
      break;
    case FloatType::BF16:
      round_to_bf16_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(x), tokens, hidden,
                                                          x_row_stride, o);
      break;
  }
  check_launch("fused_moe (activations to bf16)");
}

void launch_zero_dropped_rows(const int32_t* pair_slots, int64_t pairs, void* y, FloatType y_type, int64_t y_row_stride,
                              int64_t n, cudaStream_t stream) {
  if (pairs == 0 || n == 0) return;
  const int64_t blocks = (pairs + kZeroPairsPerBlock - 1) / kZeroPairsPerBlock;  // pairs < 2^31: below 2^31 - 1
  zero_dropped_rows_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(pair_slots, pairs, y, y_type,
                                                                                   y_row_stride, n);
  check_launch("moe_batched (dropped rows)");
}

void launch_moe_combine(const float* down, const float* weights, const PairExperts& experts, int64_t tokens,
                        int64_t top_k, int64_t hidden, void* out, FloatType out_type, cudaStream_t stream) {
  if (tokens * hidden == 0) return;
  const unsigned grid = grid_for(tokens * hidden);
  switch (out_type) {
    case FloatType::F32:
      combine_kernel<<<grid, kThreads, 0, stream>>>(down, weights, experts, tokens, top_k, hidden,
                                                    static_cast<float*>(out));
      break;
    case FloatType::F16:
      combine_kernel<<<grid, kThreads, 0, stream>>>(down, weights, experts, tokens, top_k, hidden,
                                                    static_cast<__half*>(out));
      break;
    case FloatType::BF16:
      combine_kernel<<<grid, kThreads, 0, stream>>>(down, weights, experts, tokens, top_k, hidden,
                                                    static_cast<__nv_bfloat16*>(out));
      break;
  }
  check_launch("fused_moe (combine)");
}

}  // namespace lowbit::cuda_detail
