// Device copies of the I-quant codebooks (from the same generated data as the host tables), the
// per-block copy into shared memory that the matrix kernels decode from, and the nibble formats'
// int8 tables loaded into registers.
#pragma once

#include <cstdint>

#include "cuda/common/codebook_sizes.h"
#include "cuda/common/sign_mask_table.h"
#include "lowbit/formats/codebook_data.h"
#include "lowbit/formats/common.h"

namespace lowbit::cuda_detail {

static __device__ const uint64_t kIq2xxsGridDevice[LOWBIT_IQ2XXS_GRID_SIZE] = {LOWBIT_IQ2XXS_GRID_DATA};
static __device__ const uint64_t kIq2xsGridDevice[LOWBIT_IQ2XS_GRID_SIZE] = {LOWBIT_IQ2XS_GRID_DATA};
static __device__ const uint64_t kIq2sGridDevice[LOWBIT_IQ2S_GRID_SIZE] = {LOWBIT_IQ2S_GRID_DATA};
static __device__ const uint32_t kIq3xxsGridDevice[LOWBIT_IQ3XXS_GRID_SIZE] = {LOWBIT_IQ3XXS_GRID_DATA};
static __device__ const uint32_t kIq3sGridDevice[LOWBIT_IQ3S_GRID_SIZE] = {LOWBIT_IQ3S_GRID_DATA};
static __device__ const uint64_t kIq1sGridDevice[LOWBIT_IQ1S_GRID_SIZE] = {LOWBIT_IQ1S_GRID_DATA};
// Not const: as known constants (or warp-uniform values), the compiler keeps the nibble tables in
// uniform registers and copies two of the four words into vector registers before every
// byte_perm lookup (16 instructions per 32 weights); loaded from writable memory once per kernel,
// they stay in vector registers. Nothing writes them.
static __device__ __align__(16) uint8_t kKvaluesIq4nlDevice[16] = {LOWBIT_KVALUES_IQ4NL_DATA};
static __device__ __align__(16) uint8_t kKvaluesMxfp4Device[16] = {LOWBIT_KVALUES_MXFP4_DATA};

// Loads the nibble formats' int8 tables into cb (words a decoder does not use are never loaded).
__device__ __forceinline__ void load_nibble_tables(Codebooks& cb) {
  const uint4 iq4 = *reinterpret_cast<const uint4*>(kKvaluesIq4nlDevice);
  const uint4 e2m1 = *reinterpret_cast<const uint4*>(kKvaluesMxfp4Device);
  cb.iq4nl_i8[0] = iq4.x, cb.iq4nl_i8[1] = iq4.y, cb.iq4nl_i8[2] = iq4.z, cb.iq4nl_i8[3] = iq4.w;
  cb.e2m1_i8[0] = e2m1.x, cb.e2m1_i8[1] = e2m1.y, cb.e2m1_i8[2] = e2m1.z, cb.e2m1_i8[3] = e2m1.w;
}

// The table a format reads, as raw 16-byte-aligned words, and its size in bytes.
template <Codebook kBook>
struct CodebookTable {
  static constexpr int kBytes = 0;
  __device__ static const void* data() { return nullptr; }
};
#define LOWBIT_CODEBOOK_TABLE(Tag, Array, Size, Word)                           \
  template <>                                                                   \
  struct CodebookTable<Codebook::Tag> {                                         \
    using Entry = Word;                                                         \
    static constexpr int kEntries = (Size);                                     \
    static constexpr int kBytes = (Size) * static_cast<int>(sizeof(Word));      \
    static_assert(kBytes == codebook_bytes(Codebook::Tag), "codebook_sizes.h"); \
    __device__ static const Entry* data() { return Array; }                     \
  };
LOWBIT_CODEBOOK_TABLE(kIq2xxs, kIq2xxsGridDevice, LOWBIT_IQ2XXS_GRID_SIZE, uint64_t)
LOWBIT_CODEBOOK_TABLE(kIq2xs, kIq2xsGridDevice, LOWBIT_IQ2XS_GRID_SIZE, uint64_t)
LOWBIT_CODEBOOK_TABLE(kIq2s, kIq2sGridDevice, LOWBIT_IQ2S_GRID_SIZE, uint64_t)
LOWBIT_CODEBOOK_TABLE(kIq3xxs, kIq3xxsGridDevice, LOWBIT_IQ3XXS_GRID_SIZE, uint32_t)
LOWBIT_CODEBOOK_TABLE(kIq3s, kIq3sGridDevice, LOWBIT_IQ3S_GRID_SIZE, uint32_t)
LOWBIT_CODEBOOK_TABLE(kIq1s, kIq1sGridDevice, LOWBIT_IQ1S_GRID_SIZE, uint64_t)
#undef LOWBIT_CODEBOOK_TABLE

// Points the Codebooks slot of kBook at `table` (entries `stride` apart: GridRef).
template <Codebook kBook>
__device__ __forceinline__ Codebooks codebooks_at(const void* table, int stride = 1) {
  Codebooks cb;
  load_nibble_tables(cb);
  if constexpr (kBook == Codebook::kIq2xxs) cb.iq2xxs_grid = {static_cast<const uint64_t*>(table), stride};
  if constexpr (kBook == Codebook::kIq2xs) cb.iq2xs_grid = {static_cast<const uint64_t*>(table), stride};
  if constexpr (kBook == Codebook::kIq2s) cb.iq2s_grid = {static_cast<const uint64_t*>(table), stride};
  if constexpr (kBook == Codebook::kIq3xxs) cb.iq3xxs_grid = {static_cast<const uint32_t*>(table), stride};
  if constexpr (kBook == Codebook::kIq3s) cb.iq3s_grid = {static_cast<const uint32_t*>(table), stride};
  if constexpr (kBook == Codebook::kIq1s) cb.iq1s_grid = {static_cast<const uint64_t*>(table), stride};
  return cb;
}

// The codebooks in device global memory (read through L1).
template <Codebook kBook>
__device__ __forceinline__ Codebooks global_codebooks() {
  return codebooks_at<kBook>(CodebookTable<kBook>::data());
}

// Copies kBook's table into `shared` (16-byte aligned, kBytes long) with the whole block; the
// caller synchronizes before decoding.
template <Codebook kBook>
__device__ __forceinline__ Codebooks shared_codebooks(uint8_t* shared) {
  constexpr int kWords = CodebookTable<kBook>::kBytes / 16;
  if constexpr (kWords > 0) {
    const uint4* src = reinterpret_cast<const uint4*>(CodebookTable<kBook>::data());
    uint4* dst = reinterpret_cast<uint4*>(shared);
    for (int i = threadIdx.x; i < kWords; i += blockDim.x) dst[i] = src[i];
  }
  return codebooks_at<kBook>(shared);
}

// The int8 kernels' decode table (kInt8TableBytes, codebook_sizes.h), built by the whole block
// into `shared` (caller syncs).
template <class Traits>
__device__ __forceinline__ Codebooks int8_codebooks(uint8_t* shared) {
  if constexpr (Traits::kCodebook == Codebook::kIq1s) {
    uint32_t* packed = reinterpret_cast<uint32_t*>(shared);
    for (int i = threadIdx.x; i < LOWBIT_IQ1S_GRID_SIZE; i += blockDim.x)
      packed[i] = pack_ternary_row(kIq1sGridDevice[i]);
    Codebooks cb;
    load_nibble_tables(cb);
    cb.iq1s_packed = packed;
    return cb;
  } else {
    return shared_codebooks<Traits::kCodebook>(shared);
  }
}

// A shared-memory pointer the compiler cannot see into. Seen as a table's base plus a lane offset
// below one entry's stride, a lane's copy made the compiler form every lookup as
// (index * copies | lane) * size + base, three instructions; from an address it cannot see into,
// a lookup's address is one multiply-add.
template <class T>
__device__ __forceinline__ const T* opaque_shared_address(const T* p) {
  uint32_t address = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm("" : "+r"(address));
  return static_cast<const T*>(__cvta_shared_to_generic(address));
}

// The table a Codebooks reads kBook's grid from (in the lane kernel: this lane's copy).
template <Codebook kBook>
__device__ __forceinline__ const void* grid_table(const Codebooks& cb) {
  if constexpr (kBook == Codebook::kIq2xxs) return cb.iq2xxs_grid.table;
  if constexpr (kBook == Codebook::kIq2xs) return cb.iq2xs_grid.table;
  if constexpr (kBook == Codebook::kIq2s) return cb.iq2s_grid.table;
  if constexpr (kBook == Codebook::kIq3xxs) return cb.iq3xxs_grid.table;
  if constexpr (kBook == Codebook::kIq3s) return cb.iq3s_grid.table;
  if constexpr (kBook == Codebook::kIq1s) return cb.iq1s_grid.table;
  return nullptr;
}

// The sign-mask table (cuda/common/sign_mask_table.h) built by the whole block into `shared`
// (SignMaskTable::kBytes; caller syncs).
template <int kEntryBytes, int kCopies>
__device__ __forceinline__ void build_sign_masks(uint8_t* shared) {
  using Table = SignMaskTable<kEntryBytes, kCopies>;
  uint4* dst = reinterpret_cast<uint4*>(shared);
  for (int i = threadIdx.x; i < Table::kStores; i += blockDim.x) {
    uint32_t v[4];
    Table::store_words(i, v);
    dst[i] = make_uint4(v[0], v[1], v[2], v[3]);
  }
}

// int8_codebooks with kGridCopies<Traits> copies of the grid, built by the whole block in 16-byte
// stores of consecutive copies (caller syncs); this lane reads copy lane % copies, through an
// address the compiler cannot see into where kOpaqueCopy (below).
template <class Traits, int kCopies = kGridCopies<Traits>, bool kOpaqueCopy = true>
__device__ __forceinline__ Codebooks replicated_int8_codebooks(uint8_t* shared) {
  constexpr Codebook kBook = Traits::kCodebook;
  if constexpr (kCopies == 1) {
    return int8_codebooks<Traits>(shared);
  } else {
    using Table = CodebookTable<kBook>;
    using Entry = typename Table::Entry;
    constexpr int kPerStore = 16 / static_cast<int>(sizeof(Entry));  // copies per 16-byte store
    static_assert(kCopies % kPerStore == 0, "whole 16-byte stores per entry");
    constexpr int kStoresPerEntry = kCopies / kPerStore;
    uint4* dst = reinterpret_cast<uint4*>(shared);
    for (int i = threadIdx.x; i < Table::kEntries * kStoresPerEntry; i += blockDim.x) {
      const Entry v = Table::data()[i / kStoresPerEntry];
      if constexpr (sizeof(Entry) == 4) {
        dst[i] = make_uint4(v, v, v, v);
      } else {
        const uint32_t lo = static_cast<uint32_t>(v), hi = static_cast<uint32_t>(v >> 32);
        dst[i] = make_uint4(lo, hi, lo, hi);
      }
    }
    const Entry* lane_copy = reinterpret_cast<const Entry*>(shared) + (threadIdx.x & 31) % kCopies;
    return codebooks_at<kBook>(kOpaqueCopy ? opaque_shared_address(lane_copy) : lane_copy, kCopies);
  }
}

}  // namespace lowbit::cuda_detail
