// The lane kernel's table of sign masks (LaneShape's sign_table): the two words of byte masks
// (0xFF where the weight is negative) of each seven-bit sign code of IQ2_XXS, IQ2_XS and IQ3_XXS
// (ksigns_iq2xs: the eighth sign is the parity), laid out like the kernel's grid table of kCopies
// interleaved copies of kEntryBytes entries (replicated_int8_codebooks), so that a lane's masks of
// code c sit at c * kCopies * kEntryBytes from its grid copy plus the grid's size: 8-byte entries
// hold both words, 4-byte ones the low words, then a plane of the high words. Plain C++, so that
// the host tests check the layout the kernel builds (device_codebooks.cuh build_sign_masks).
#pragma once

#include <cstdint>

#include "lowbit/formats/common.h"

namespace lowbit {

template <int kEntryBytes, int kCopies>
struct SignMaskTable {
  static_assert(kEntryBytes == 4 || kEntryBytes == 8, "grid entries of 4 or 8 bytes");
  static constexpr int kPerStore = 16 / kEntryBytes;  // copies per 16-byte store
  static_assert(kCopies % kPerStore == 0, "whole 16-byte stores per entry");
  static constexpr int kStoresPerCode = kCopies / kPerStore;
  static constexpr int kPlanes = kEntryBytes == 8 ? 1 : 2;
  static constexpr int kStores = kPlanes * 128 * kStoresPerCode;  // 16-byte stores
  static constexpr int kBytes = 16 * kStores;                     // 128 * 8 * kCopies

  // The four words of 16-byte store i (i < kStores).
  LOWBIT_HD static void store_words(int i, uint32_t (&v)[4]) {
    const int plane = i / (128 * kStoresPerCode);
    const uint32_t signs = ksigns_iq2xs(static_cast<uint32_t>(i / kStoresPerCode % 128));
    const uint32_t lo = spread_bits4(signs) * 0xFFu, hi = spread_bits4(signs >> 4) * 0xFFu;
    if constexpr (kEntryBytes == 8) {
      v[0] = lo, v[1] = hi, v[2] = lo, v[3] = hi;
    } else {
      const uint32_t w = plane ? hi : lo;
      v[0] = v[1] = v[2] = v[3] = w;
    }
  }

  // The masks of sign code `code` (weights 0-3, 4-7) from a lane's copy of the table: one 8-byte
  // load (LDS.64) for 8-byte entries, one per plane for 4-byte ones.
  LOWBIT_HD static void masks_at(const uint8_t* lane_copy, uint32_t code, uint32_t& lo, uint32_t& hi) {
    const uint8_t* entry = lane_copy + code * static_cast<uint32_t>(kCopies * kEntryBytes);
    if constexpr (kEntryBytes == 8) {
      const uint64_t both = *reinterpret_cast<const uint64_t*>(entry);
      lo = static_cast<uint32_t>(both), hi = static_cast<uint32_t>(both >> 32);
    } else {
      lo = *reinterpret_cast<const uint32_t*>(entry);
      hi = *reinterpret_cast<const uint32_t*>(entry + 128 * kCopies * kEntryBytes);
    }
  }
};

}  // namespace lowbit
