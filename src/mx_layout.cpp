#include "lowbit/mx_layout.h"

#include <cstddef>
#include <cstring>

#include "lowbit/error.h"
#include "lowbit/formats/mx.h"

namespace lowbit {
namespace {

constexpr int64_t kGgufBlockBytes = sizeof(BlockMxfp4);
constexpr int64_t kSplitBlockBytes = kMxBlock / 2;  // 32 E2M1 codes, two per byte
constexpr int kHalfBlock = kMxBlock / 2;            // GGUF splits a block into a low and a high half

void check_rows(int64_t rows) {
  LOWBIT_CHECK(rows >= 0, "rows: must be >= 0, got ", rows);
}

void check_buffer(const void* p, int64_t rows, const char* arg) {
  // An empty batch may come with null pointers (torch hands out null data for empty tensors).
  LOWBIT_CHECK(rows == 0 || p != nullptr, arg, ": null pointer for ", rows, " rows");
}

}  // namespace

int64_t mx_scales_per_row(int64_t k, const char* arg) {
  LOWBIT_CHECK(k > 0 && k % kMxBlock == 0, arg, ": K = ", k, " must be a positive multiple of ", kMxBlock,
               " (split MX layouts hold whole 32-element blocks, one E8M0 scale each)");
  return k / kMxBlock;
}

int64_t mx_scale_pairs_per_row(int64_t scales_per_row) {
  return (scales_per_row + 1) / 2;
}

void pair_mx_scales(const uint8_t* scales, uint8_t* paired, int64_t rows, int64_t scales_per_row) {
  check_rows(rows);
  LOWBIT_CHECK(scales_per_row > 0, "scales: a row must hold at least one E8M0 scale, got ", scales_per_row);
  check_buffer(scales, rows, "scales");
  check_buffer(paired, rows, "paired");
  const int64_t paired_row = 2 * mx_scale_pairs_per_row(scales_per_row);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* dst = paired + r * paired_row;
    // Pairs are consecutive blocks, so the paired row is the scale row plus one padding byte.
    std::memcpy(dst, scales + r * scales_per_row, static_cast<size_t>(scales_per_row));
    if (paired_row != scales_per_row) dst[scales_per_row] = 0x00;
  }
}

void unpair_mx_scales(const uint8_t* paired, uint8_t* scales, int64_t rows, int64_t scales_per_row) {
  check_rows(rows);
  LOWBIT_CHECK(scales_per_row > 0, "k: a row must hold at least one 32-element block, got ", scales_per_row, " scales");
  check_buffer(paired, rows, "paired");
  check_buffer(scales, rows, "scales");
  const int64_t paired_row = 2 * mx_scale_pairs_per_row(scales_per_row);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = paired + r * paired_row;
    if (paired_row != scales_per_row) {
      LOWBIT_CHECK(src[scales_per_row] == 0x00, "paired: row ", r, " has padding byte 0x", std::hex,
                   static_cast<int>(src[scales_per_row]), std::dec, " at [", scales_per_row / 2,
                   ", 1]; for K/32 = ", scales_per_row,
                   " (odd) it must be 0x00. A real scale there means k is wrong (the paired row holds ", paired_row,
                   " scales)");
    }
    std::memcpy(scales + r * scales_per_row, src, static_cast<size_t>(scales_per_row));
  }
}

void mxfp4_gguf_to_split(const uint8_t* blocks, uint8_t* elements, uint8_t* scales, int64_t rows, int64_t k) {
  check_rows(rows);
  const int64_t blocks_per_row = mx_scales_per_row(k, "k");
  check_buffer(blocks, rows, "blocks");
  check_buffer(elements, rows, "elements");
  check_buffer(scales, rows, "scales");
  const int64_t total_blocks = rows * blocks_per_row;
  for (int64_t b = 0; b < total_blocks; ++b) {
    const uint8_t* src = blocks + b * kGgufBlockBytes;
    const uint8_t* qs = src + offsetof(BlockMxfp4, qs);
    scales[b] = src[offsetof(BlockMxfp4, e)];
    // Nibble code of element j (0..31) in GGUF order; E2M1 codes are identical in both layouts.
    auto code = [qs](int j) -> uint8_t {
      return j < kHalfBlock ? static_cast<uint8_t>(qs[j] & 0x0F) : static_cast<uint8_t>(qs[j - kHalfBlock] >> 4);
    };
    uint8_t* dst = elements + b * kSplitBlockBytes;
    for (int i = 0; i < kSplitBlockBytes; ++i) {
      dst[i] = static_cast<uint8_t>(code(2 * i) | (code(2 * i + 1) << 4));
    }
  }
}

void mxfp4_split_to_gguf(const uint8_t* elements, const uint8_t* scales, uint8_t* blocks, int64_t rows, int64_t k) {
  check_rows(rows);
  const int64_t blocks_per_row = mx_scales_per_row(k, "k");
  check_buffer(elements, rows, "elements");
  check_buffer(scales, rows, "scales");
  check_buffer(blocks, rows, "blocks");
  const int64_t total_blocks = rows * blocks_per_row;
  for (int64_t b = 0; b < total_blocks; ++b) {
    const uint8_t* src = elements + b * kSplitBlockBytes;
    // Nibble code of element i (0..31) in split order: even elements low, odd elements high.
    auto code = [src](int i) -> uint8_t {
      return (i & 1) ? static_cast<uint8_t>(src[i / 2] >> 4) : static_cast<uint8_t>(src[i / 2] & 0x0F);
    };
    uint8_t* dst = blocks + b * kGgufBlockBytes;
    dst[offsetof(BlockMxfp4, e)] = scales[b];
    uint8_t* qs = dst + offsetof(BlockMxfp4, qs);
    for (int j = 0; j < kHalfBlock; ++j) {
      qs[j] = static_cast<uint8_t>(code(j) | (code(j + kHalfBlock) << 4));
    }
  }
}

}  // namespace lowbit
