// MoE routing on the device (lowbit/cuda_moe.h, moe_align): four small kernels, no host read.
//   1. pair_experts: each pair's local expert (-1 when dropped).
//   2. segment histograms: block s counts the experts of pairs [256 s, 256 s + 256).
//   3. one block: per expert the exclusive prefix over segments, the padded run lengths and their
//      exclusive prefix (expert offsets), block_experts, padding sentinels, num_padded; the
//      histograms become each segment's first slot per expert.
//   4. placement: block s ranks its pairs within each expert (warp match + per-warp histograms),
//      stable in pair order, and writes sorted_pairs and pair_slots.
// Every result is a function of the ids alone (integer counts; no order-dependent atomics).
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/launch.h"
#include "cuda/moe/moe_routing_launch.h"
#include "lowbit/moe_policy.h"

namespace lowbit::cuda_detail {
namespace {

constexpr int kSegment = kMoeRoutingSegment;
constexpr int kSegmentWarps = kSegment / 32;
constexpr int kScanThreads = 512;
static_assert(kMoeMaxExperts <= kScanThreads, "one scan thread per expert");

__global__ void pair_experts_kernel(PairExperts experts, int64_t pairs, int32_t* out) {
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < pairs;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[p] = experts.of(p);
}

__global__ void __launch_bounds__(kSegment)
    segment_histogram_kernel(const int32_t* pair_experts, int64_t pairs, int32_t experts, int32_t* counts) {
  __shared__ int32_t hist[kMoeMaxExperts];
  for (int e = threadIdx.x; e < experts; e += kSegment) hist[e] = 0;
  __syncthreads();
  const int64_t p = static_cast<int64_t>(blockIdx.x) * kSegment + threadIdx.x;
  if (p < pairs) {
    const int32_t e = pair_experts[p];
    if (e >= 0) atomicAdd(&hist[e], 1);  // integer counts: the same whatever the order
  }
  __syncthreads();
  for (int e = threadIdx.x; e < experts; e += kSegment)
    counts[static_cast<int64_t>(blockIdx.x) * experts + e] = hist[e];
}

__global__ void __launch_bounds__(kScanThreads)
    expert_offsets_kernel(int32_t* counts, int64_t segments, int32_t experts, int32_t block_size, int32_t pairs,
                          int32_t* sorted_pairs, int64_t capacity, int32_t* block_experts, int64_t blocks,
                          int32_t* num_padded) {
  __shared__ int32_t scan[kScanThreads];
  const int e = threadIdx.x;
  int32_t total = 0;
  if (e < experts)
    for (int64_t s = 0; s < segments; ++s) total += counts[s * experts + e];
  const int32_t padded = (total + block_size - 1) / block_size * block_size;
  scan[e] = e < experts ? padded : 0;
  __syncthreads();
  for (int step = 1; step < kScanThreads; step *= 2) {  // inclusive Hillis-Steele scan
    const int32_t add = e >= step ? scan[e - step] : 0;
    __syncthreads();
    scan[e] += add;
    __syncthreads();
  }
  const int32_t used = scan[kScanThreads - 1];
  const int32_t offset = scan[e] - (e < experts ? padded : 0);
  if (e < experts) {
    int32_t slot = offset;
    for (int64_t s = 0; s < segments; ++s) {  // each segment's first slot for this expert
      const int32_t c = counts[s * experts + e];
      counts[s * experts + e] = slot;
      slot += c;
    }
    for (int32_t r = offset + total; r < offset + padded; ++r) sorted_pairs[r] = pairs;
    for (int32_t b = offset / block_size; b < (offset + padded) / block_size; ++b) block_experts[b] = e;
  }
  if (e == 0) *num_padded = used;
  for (int64_t r = used + threadIdx.x; r < capacity; r += kScanThreads) sorted_pairs[r] = pairs;
  for (int64_t b = used / block_size + threadIdx.x; b < blocks; b += kScanThreads) block_experts[b] = -1;
}

__global__ void __launch_bounds__(kSegment)
    place_pairs_kernel(const int32_t* pair_experts, int64_t pairs, int32_t experts, const int32_t* first_slots,
                       int32_t* sorted_pairs, int32_t* pair_slots) {
  __shared__ int32_t warp_hist[kSegmentWarps][kMoeMaxExperts];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = threadIdx.x; i < kSegmentWarps * experts; i += kSegment) warp_hist[i / experts][i % experts] = 0;
  __syncthreads();
  const int64_t p = static_cast<int64_t>(blockIdx.x) * kSegment + threadIdx.x;
  const int32_t e = p < pairs ? pair_experts[p] : -1;
  const unsigned peers = __match_any_sync(0xFFFFFFFFu, e);
  const int rank_in_warp = __popc(peers & ((1u << lane) - 1u));
  if (e >= 0 && rank_in_warp == 0) warp_hist[warp][e] = __popc(peers);
  __syncthreads();
  if (p >= pairs) return;
  if (e < 0) {
    pair_slots[p] = -1;
    return;
  }
  int32_t slot = first_slots[static_cast<int64_t>(blockIdx.x) * experts + e] + rank_in_warp;
  for (int w = 0; w < warp; ++w) slot += warp_hist[w][e];
  sorted_pairs[slot] = static_cast<int32_t>(p);
  pair_slots[p] = slot;
}

unsigned grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
}

}  // namespace

void launch_pair_experts(const PairExperts& experts, int64_t pairs, int32_t* pair_experts, cudaStream_t stream) {
  if (pairs == 0) return;
  pair_experts_kernel<<<grid_for(pairs, 256), 256, 0, stream>>>(experts, pairs, pair_experts);
  check_launch("moe_pair_experts");
}

void launch_moe_align(const int32_t* pair_experts, int64_t pairs, int64_t experts, int block_size,
                      int32_t* segment_counts, int32_t* sorted_pairs, int64_t capacity, int32_t* block_experts,
                      int64_t blocks, int32_t* num_padded, int32_t* pair_slots, cudaStream_t stream) {
  const int64_t segments = (pairs + kSegment - 1) / kSegment;
  const auto e32 = static_cast<int32_t>(experts);
  if (segments > 0) {
    segment_histogram_kernel<<<static_cast<unsigned>(segments), kSegment, 0, stream>>>(pair_experts, pairs, e32,
                                                                                       segment_counts);
    check_launch("moe_align (histograms)");
  }
  expert_offsets_kernel<<<1, kScanThreads, 0, stream>>>(segment_counts, segments, e32, block_size,
                                                        static_cast<int32_t>(pairs), sorted_pairs, capacity,
                                                        block_experts, blocks, num_padded);
  check_launch("moe_align (offsets)");
  if (segments > 0) {
    place_pairs_kernel<<<static_cast<unsigned>(segments), kSegment, 0, stream>>>(
        pair_experts, pairs, e32, segment_counts, sorted_pairs, pair_slots);
    check_launch("moe_align (placement)");
  }
}

}  // namespace lowbit::cuda_detail
