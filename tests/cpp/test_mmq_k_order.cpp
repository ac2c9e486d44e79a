// MMQ's IQ4 bf16 decode by pairs from byte tables in registers (csrc/cuda/mmq/mmq_k_order.h): every
// code byte, at either of the two positions of a word that it decodes, gives the pair the
// shared-memory table holds, the bf16 of its low nibble's codebook value, then its high nibble's.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "cuda/mmq/mmq_k_order.h"

namespace lowbit::cuda_detail {
namespace {

uint32_t table_pair(uint32_t byte) {
  const auto value = [](uint32_t nibble) {
    return static_cast<float>(static_cast<int8_t>(codebook::kKvaluesIq4nl[nibble]));
  };
  return static_cast<uint32_t>(float_to_bf16(value(byte & 15u))) |
         (static_cast<uint32_t>(float_to_bf16(value(byte >> 4))) << 16);
}

TEST(MmqKOrder, SmallIntegersInBf16AreExact) {
  for (int v = -255; v <= 255; ++v)
    ASSERT_EQ(bf16_of_small_int(v), float_to_bf16(static_cast<float>(v))) << "v = " << v;
}

TEST(MmqKOrder, NibblePairsFromByteTablesMatchThePairTable) {
  uint32_t lo[4], hi[4];
  for (int i = 0; i < 4; ++i) lo[i] = iq4_bf16_byte_word(false, i), hi[i] = iq4_bf16_byte_word(true, i);
  std::mt19937 rng(20261203u);
  for (uint32_t byte = 0; byte < 256; ++byte) {
    for (int at = 0; at < 2; ++at) {
      // the byte at position `at` (of the two looked up), random bytes around it
      const uint32_t codes = (rng() & ~(0xFFu << (8 * at))) | (byte << (8 * at));
      uint32_t pairs[2];
      nibble_pairs_from_tables(codes, lo, hi, pairs);
      for (int i = 0; i < 2; ++i)
        ASSERT_EQ(pairs[i], table_pair((codes >> (8 * i)) & 0xFFu)) << "codes " << std::hex << codes << " byte " << i;
    }
  }
}

}  // namespace
}  // namespace lowbit::cuda_detail
