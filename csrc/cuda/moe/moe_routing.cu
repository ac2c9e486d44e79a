// MoE routing on the device (lowbit/cuda_moe.h, moe_align): no host read.
// Up to kMoeOneBlockPairs pairs, one kernel of one block (routing_one_block_kernel): the pairs'
// experts counted in shared memory, the scan, then the pairs placed a block-wide chunk at a time.
// Beyond, four small kernels, each spread over the pairs:
//   1. pair_experts: each pair's local expert (-1 when dropped).
//   2. segment histograms: block s counts the experts of pairs [256 s, 256 s + 256).
//   3. one block: per expert the exclusive prefix over segments, the padded run lengths and their
//      exclusive prefix (expert offsets), block_experts, padding sentinels, num_padded; the
//      histograms become each segment's first slot per expert.
//   4. placement: block s ranks its pairs within each expert (warp ballots + per-warp histograms),
//      stable in pair order, and writes sorted_pairs and pair_slots.
// Both give the same results, a function of the ids alone (integer counts; no order-dependent
// atomics): pairs sorted by expert, stable in pair order.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/launch.h"
#include "cuda/common/ptx.cuh"
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

constexpr int kScanWarps = kScanThreads / 32;
static_assert(kScanThreads % 32 == 0 && kScanWarps <= 32, "one warp scans the warps' totals");

// Bits that tell a pair's local expert (0 .. kMoeMaxExperts - 1) from the others and from -1 (a
// dropped pair: all bits set).
constexpr int kExpertBits = [] {
  int bits = 1;
  while ((int64_t{1} << (bits - 1)) < kMoeMaxExperts) ++bits;
  return bits;
}();
static_assert((int64_t{1} << (kExpertBits - 1)) >= kMoeMaxExperts, "the top bit is 0 for every expert, 1 for -1");

// The lanes of the warp whose e equals this lane's: the value of __match_any_sync(~0u, e), from one
// ballot per bit of e, which measured faster than the match instruction in the routing of 4096 pairs
// (benchmarks/NOTES.md). Every lane of the warp calls it, with e in [-1, kMoeMaxExperts): another
// negative value would share its low bits with an expert.
__device__ __forceinline__ unsigned lanes_with_expert(int32_t e) {
  unsigned peers = 0xFFFFFFFFu;
#pragma unroll
  for (int b = 0; b < kExpertBits; ++b) {
    const bool bit = (e >> b) & 1;
    const unsigned set = __ballot_sync(0xFFFFFFFFu, bit);
    peers &= bit ? set : ~set;
  }
  return peers;
}

// Inclusive sum of `value` over the block's kScanThreads threads in thread order: a shuffle scan
// per warp, then one over the warps' totals (two barriers, where a scan through shared memory
// takes two per step). `warp_totals`: kScanWarps ints of shared scratch. `total`: the block's sum.
__device__ int32_t block_inclusive_sum(int32_t value, int32_t* warp_totals, int32_t& total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int32_t below = __shfl_up_sync(0xFFFFFFFFu, value, d);
    if (lane >= d) value += below;
  }
  if (lane == 31) warp_totals[warp] = value;
  __syncthreads();
  if (warp == 0) {
    int32_t t = lane < kScanWarps ? warp_totals[lane] : 0;
#pragma unroll
    for (int d = 1; d < kScanWarps; d *= 2) {
      const int32_t below = __shfl_up_sync(0xFFFFFFFFu, t, d);
      if (lane >= d) t += below;
    }
    if (lane < kScanWarps) warp_totals[lane] = t;
  }
  __syncthreads();
  total = warp_totals[kScanWarps - 1];
  return value + (warp > 0 ? warp_totals[warp - 1] : 0);
}

// The slots no pair will take, written before the experts are laid out (the one-block routing,
// whose capacity is small): every sorted row the pairs' sentinel (`pairs`) and every block -1, in
// coalesced stores by the whole block; the pairs and each expert's blocks overwrite theirs after a
// block barrier. Written per expert instead (lay_out_experts), the padding rows are up to
// block_size - 1 scattered stores per expert thread.
__device__ void fill_routing_sentinels(int32_t pairs, int32_t* sorted_pairs, int64_t capacity, int32_t* block_experts,
                                       int64_t blocks) {
  for (int64_t r = threadIdx.x; r < capacity; r += blockDim.x) sorted_pairs[r] = pairs;
  for (int64_t b = threadIdx.x; b < blocks; b += blockDim.x) block_experts[b] = -1;
}

// Thread e < experts holds expert e's pair count `total`: lays the experts' padded runs out
// (block_experts of its blocks, num_padded and, unless kSentinelsFilled (fill_routing_sentinels
// ran before), sorted_pairs' padding sentinels, the unused tail and the blocks past it) and
// returns the expert's first slot. Called by all kScanThreads threads of the block (`scan`:
// kScanWarps ints of shared scratch); its first barrier orders the sentinels before the blocks.
template <bool kSentinelsFilled>
__device__ int32_t lay_out_experts(int32_t total, int32_t experts, int32_t block_size, int32_t pairs,
                                   int32_t* sorted_pairs, int64_t capacity, int32_t* block_experts, int64_t blocks,
                                   int32_t* num_padded, int32_t* scan) {
  const int e = threadIdx.x;
  const int32_t padded = e < experts ? (total + block_size - 1) / block_size * block_size : 0;
  int32_t used;
  const int32_t offset = block_inclusive_sum(padded, scan, used) - padded;
  if (e < experts) {
    if constexpr (!kSentinelsFilled)
      for (int32_t r = offset + total; r < offset + padded; ++r) sorted_pairs[r] = pairs;
    for (int32_t b = offset / block_size; b < (offset + padded) / block_size; ++b) block_experts[b] = e;
  }
  if (e == 0) *num_padded = used;
  if constexpr (!kSentinelsFilled) {
    for (int64_t r = used + threadIdx.x; r < capacity; r += kScanThreads) sorted_pairs[r] = pairs;
    for (int64_t b = used / block_size + threadIdx.x; b < blocks; b += kScanThreads) block_experts[b] = -1;
  }
  return offset;
}

__global__ void __launch_bounds__(kScanThreads)
    expert_offsets_kernel(int32_t* counts, int64_t segments, int32_t experts, int32_t block_size, int32_t pairs,
                          int32_t* sorted_pairs, int64_t capacity, int32_t* block_experts, int64_t blocks,
                          int32_t* num_padded) {
  __shared__ int32_t scan[kScanWarps];
  const int e = threadIdx.x;
  int32_t total = 0;
  if (e < experts)
    for (int64_t s = 0; s < segments; ++s) total += counts[s * experts + e];
  const int32_t offset = lay_out_experts<false>(total, experts, block_size, pairs, sorted_pairs, capacity,
                                                block_experts, blocks, num_padded, scan);
  if (e < experts) {
    int32_t slot = offset;
    for (int64_t s = 0; s < segments; ++s) {  // each segment's first slot for this expert
      const int32_t c = counts[s * experts + e];
      counts[s * experts + e] = slot;
      slot += c;
    }
  }
}

// The whole routing of up to kMoeOneBlockPairs pairs in one block of kScanThreads threads: small
// routings are four launches' latency in the four-kernel form, and one block's work here. Thread t
// reads the experts of pairs t, t + kScanThreads, ... once, every load issued before any is used,
// and keeps them in registers for both passes. Pass 1 counts each expert's pairs in shared memory;
// lay_out_experts gives their first slots; pass 2 takes the pairs a chunk of kScanThreads at a
// time, in pair order: each warp's leader of an expert (lanes_with_expert) writes how many of the
// warp's lanes have it, thread e turns expert e's column of these counts into each warp's first
// slot (from the expert's running next slot), and each pair's slot is its warp's first slot plus
// its rank among its warp's lanes: two block barriers per chunk and one shared read per pair.
__global__ void __launch_bounds__(kScanThreads)
    routing_one_block_kernel(PairExperts experts, int32_t pairs, int32_t block_size, int32_t* sorted_pairs,
                             int64_t capacity, int32_t* block_experts, int64_t blocks, int32_t* num_padded,
                             int32_t* pair_slots) {
  constexpr int kChunks = static_cast<int>(kMoeOneBlockPairs / kScanThreads);
  static_assert(kMoeOneBlockPairs % kScanThreads == 0, "whole chunks");
  __shared__ int32_t next_slot[kMoeMaxExperts];  // pass 1: counts; pass 2: each expert's next slot
  __shared__ int32_t scan[kScanWarps];
  // pass 2, per chunk: the count of each warp's lanes with each expert, then (where not 0) the
  // warp's first slot for it; entries return to 0 once the warp's pairs have read them
  __shared__ int32_t warp_hist[kScanWarps][kMoeMaxExperts];
  // A programmatic launch: the block takes its multiprocessor while the kernel before drains and
  // waits for it here (that kernel may write the ids, or still read the last routing's outputs);
  // the prologue after it may start its blocks now, each waiting for this one's completion.
  pdl_wait_for_primary();
  pdl_launch_dependents();
  const auto E = static_cast<int32_t>(experts.experts);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int32_t pair_expert[kChunks];  // pairs <= kMoeOneBlockPairs (launch_moe_routing)
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int32_t p = c * kScanThreads + static_cast<int32_t>(threadIdx.x);
    pair_expert[c] = p < pairs ? experts.of(p) : -1;
  }
  fill_routing_sentinels(pairs, sorted_pairs, capacity, block_experts, blocks);
  for (int e = threadIdx.x; e < E; e += kScanThreads) next_slot[e] = 0;
  for (int i = threadIdx.x; i < kScanWarps * E; i += kScanThreads) warp_hist[i / E][i % E] = 0;
  __syncthreads();
#pragma unroll
  for (int c = 0; c < kChunks; ++c)
    if (pair_expert[c] >= 0) atomicAdd(&next_slot[pair_expert[c]], 1);  // integer counts: any order
  __syncthreads();
  const int32_t total = threadIdx.x < E ? next_slot[threadIdx.x] : 0;
  const int32_t offset = lay_out_experts<true>(total, E, block_size, pairs, sorted_pairs, capacity, block_experts,
                                               blocks, num_padded, scan);
  if (threadIdx.x < E) next_slot[threadIdx.x] = offset;
  // (the next barrier, the first of the chunk loop's, orders next_slot before its reads)
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    if (c * kScanThreads >= pairs) break;  // the same for the whole block
    const int32_t p = c * kScanThreads + static_cast<int32_t>(threadIdx.x);
    const int32_t e = pair_expert[c];
    const unsigned peers = lanes_with_expert(e);
    const int rank_in_warp = __popc(peers & ((1u << lane) - 1u));
    const bool leader = e >= 0 && rank_in_warp == 0;
    if (leader) warp_hist[warp][e] = __popc(peers);
    __syncthreads();
    if (threadIdx.x < E) {
      // expert threadIdx.x's column: each warp's count -> its first slot, in warp order
      int32_t counts[kScanWarps];
#pragma unroll
      for (int w = 0; w < kScanWarps; ++w) counts[w] = warp_hist[w][threadIdx.x];
      int32_t slot = next_slot[threadIdx.x];
#pragma unroll
      for (int w = 0; w < kScanWarps; ++w) {
        if (counts[w] != 0) warp_hist[w][threadIdx.x] = slot;
        slot += counts[w];
      }
      next_slot[threadIdx.x] = slot;
    }
    __syncthreads();
    if (e >= 0) {
      const int32_t slot = warp_hist[warp][e] + rank_in_warp;
      sorted_pairs[slot] = p;
      pair_slots[p] = slot;
    } else if (p < pairs) {
      pair_slots[p] = -1;
    }
    __syncwarp();  // the warp's lanes have read their expert's entry before its leader clears it
    if (leader) warp_hist[warp][e] = 0;
    __syncwarp();  // and clears it before the next chunk's leader (maybe another lane) writes it
    // (the next chunk's first barrier orders the clears before its column pass)
  }
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
  const unsigned peers = lanes_with_expert(e);
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

void launch_moe_routing(const PairExperts& experts, int64_t pairs, int block_size, int32_t* pair_experts,
                        int32_t* segment_counts, int32_t* sorted_pairs, int64_t capacity, int32_t* block_experts,
                        int64_t blocks, int32_t* num_padded, int32_t* pair_slots, cudaStream_t stream) {
  const auto e32 = static_cast<int32_t>(experts.experts);
  if (pairs <= kMoeOneBlockPairs) {
    launch_programmatic<&routing_one_block_kernel>(1, kScanThreads, 0, stream, "moe_align (one block)", experts,
                                                   static_cast<int32_t>(pairs), block_size, sorted_pairs, capacity,
                                                   block_experts, blocks, num_padded, pair_slots);
    return;
  }
  launch_pair_experts(experts, pairs, pair_experts, stream);
  const int64_t segments = (pairs + kSegment - 1) / kSegment;
  segment_histogram_kernel<<<static_cast<unsigned>(segments), kSegment, 0, stream>>>(pair_experts, pairs, e32,
                                                                                     segment_counts);
  check_launch("moe_align (histograms)");
  expert_offsets_kernel<<<1, kScanThreads, 0, stream>>>(segment_counts, segments, e32, block_size,
                                                        static_cast<int32_t>(pairs), sorted_pairs, capacity,
                                                        block_experts, blocks, num_padded);
  check_launch("moe_align (offsets)");
  place_pairs_kernel<<<static_cast<unsigned>(segments), kSegment, 0, stream>>>(pair_experts, pairs, e32, segment_counts,
                                                                               sorted_pairs, pair_slots);
  check_launch("moe_align (placement)");
}

}  // namespace lowbit::cuda_detail
