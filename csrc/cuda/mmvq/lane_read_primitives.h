// The pieces the dp4a MMVQ (lane_kernel.cuh) reads formats with, beside the formats' own block
// reads: whole-word loads of weight bytes, aligned-word reads of 2-byte-aligned blocks, the sign
// mask of split-sign dot products and nibble lookups as dp4a addends. The per-format read
// strategies built from them are LaneReads<T> (lane_reads_<family>.h; lane_reads.h gathers them).
//
// Host-compilable (LOWBIT_HD) like the formats, so that the GTest checks every read against the
// format's decode_i8 and scale_i8 on the CPU (tests/cpp/test_lane_reads.cpp).
#pragma once

#include <cstdint>
#include <cstring>

#include "lowbit/formats/common.h"
#include "lowbit/formats/traits.h"
#include "lowbit/quant_type.h"

namespace lowbit {

// How the dp4a MMVQ reads the blocks of type T where it does better than the format's decode_i8
// and scale_i8 (the fallback of a type without a specialization). A specialization may define:
//   lane_anchor(s): where a thread's row pointer sits in the block for sub-block s (HasLaneAnchor)
//   decode_i8_addends(b, g, cb): decode_i8 as two dp4a addends (HasI8Addends)
//   decode_i8_whole_sub / grid_i8_whole_sub, decode_i8_addends_whole_sub: the same groups from the
//     sub-block's bytes read whole (HasWholeSubDecode, HasWholeSubGrid, HasWholeSubAddends)
//   LaneWords and lane_words(block4, sub, odd) with decode_i8_from or grid_i8_from, scale_i8_from
//     and, with addends, decode_i8_addends_from: the sub-block read as aligned words (HasLaneWords)
// Each yields exactly what the format's own reads yield (the GTest checks it on random blocks).
template <QuantType T>
struct LaneReads {};

// What a LaneReads specialization reads: the format's traits and block struct, by their names.
template <QuantType T>
struct LaneReadsBase {
  using Format = FormatTraits<T>;
  using Block = typename Format::Block;
};

// Byte l of a word, zero-extended: one PRMT into a zero word on the device, which a grid lookup
// then scales and adds to its copy's address in one IMAD; from a shift and mask the compiler
// scaled the byte in place (shift, mask, add: one instruction more per lookup). IQ2_S's reads
// gained nothing from it and keep the shift. byte_perm on both sides, so that the host tests run
// the device's definition (the same SASS as __byte_perm).
LOWBIT_HD uint32_t word_byte(uint32_t word, int l) {
  return byte_perm(word, 0u, 0x4440u + static_cast<uint32_t>(l));
}

// A little-endian word (halfword) of weight bytes at a 4-byte (2-byte) aligned address, read whole
// on the device: a plain load whose users each take one byte is narrowed into byte loads.
LOWBIT_HD uint32_t load_weight_word(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(reinterpret_cast<const unsigned int*>(p));
#else
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}
LOWBIT_HD uint32_t load_weight_half(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(reinterpret_cast<const unsigned short*>(p));
#else
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
#endif
}

// Two consecutive little-endian words of weight bytes (global memory the kernel does not write) at
// an 8-byte-aligned address. On the device one 64-bit read-only load: a plain 64-bit load whose
// callers each use one word is narrowed by the compiler into separate 32-bit loads, an ldg is not
// (and equal ldgs merge).
LOWBIT_HD void load_weight_words2(const uint8_t* p, uint32_t& lo, uint32_t& hi) {
#if defined(__CUDA_ARCH__)
  const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
  lo = v.x, hi = v.y;
#else
  std::memcpy(&lo, p, 4);
  std::memcpy(&hi, p + 4, 4);
#endif
}
// load_weight_words2, or with kStaged from a copy of the weights in shared memory (the lane
// kernel's staged rounds), where a read-only global load must not go.
template <bool kStaged>
LOWBIT_HD void load_weight_words2_from(const uint8_t* p, uint32_t& lo, uint32_t& hi) {
  if constexpr (kStaged) {
#if defined(__CUDA_ARCH__)
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    lo = v.x, hi = v.y;
#else
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
#endif
  } else {
    load_weight_words2(p, lo, hi);
  }
}

// Aligned-word reads of 2-byte-aligned blocks whose address mod 4 a reader knows (HasLaneWords,
// lane_reads.h): the block starts at block4 + 2 * odd with block4 4-byte aligned.
// kN words of the block's bytes from `offset` (2 mod 4): kN + 1 aligned words from
// block4 + offset - 2, the same address for either phase, of which bytes 2.. (odd == false) or
// 4.. (odd) are the run. What it reads beyond the run: 2 bytes before and 2 after it (even
// phase), or 4 before it (odd phase). For offset >= 2 those lie in the block or, for a run at the
// block's end (even phase) or start (odd phase), 2 bytes into the neighbouring block of its pair.
template <int kN>
LOWBIT_HD void phase_words(const uint8_t* block4, int offset, bool odd, uint32_t (&out)[kN]) {
  uint32_t w[kN + 1];
  LOWBIT_UNROLL
  for (int i = 0; i <= kN; ++i) w[i] = load_u32<4>(block4 + offset - 2 + 4 * i);
  const uint32_t sel = odd ? 0x7654u : 0x5432u;
  LOWBIT_UNROLL
  for (int i = 0; i < kN; ++i) out[i] = byte_perm(w[i], w[i + 1], sel);
}

// The block's first two bytes (the fp16 scale of most formats) from the aligned word at block4.
LOWBIT_HD uint32_t phase_head_u16(const uint8_t* block4, bool odd) {
  return byte_perm(load_u32<4>(block4), 0u, odd ? 0x4432u : 0x4410u);
}

// 0xFF in byte i where bit i of `nibble` (< 16) is set: the multiply puts bit i at bit 8i + 7
// without carries (the four shifted copies do not overlap), prmt's sign-replicate mode spreads
// each top bit over its byte. With it, dot(signed, x) = dot(mag, x) - 2 dot(mag & mask, x): two
// dp4a instead of forming the negated bytes (the dp4a MMVQ at one token).
LOWBIT_HD uint32_t sign_byte_mask4(uint32_t nibble) {
  return byte_perm(nibble * 0x10204080u, 0u, 0xBA98u);
}

// An int8 group as two addends per word, for dot products only: each signed byte of the group is
// the sum of a's and b's bytes there, so dp4a(a, x) + dp4a(b, x) is the word's dot product with x
// (the byte sums themselves are never formed: no carries between bytes).
struct Int8Addends {
  uint32_t a[2], b[2];
};

// Whether a 16-entry int8 table (as bytes) splits for nibble_lookup_addends: entries 0..7
// negative, entries 8..15 in 0..126 (the raised words are formed by one word add of 0x01010101,
// so no byte may carry into the next).
constexpr bool nibble_table_splits(const uint8_t (&t)[16]) {
  for (int i = 0; i < 8; ++i)
    if (!(t[i] & 0x80u) || t[i + 8] >= 0x7Fu) return false;
  return true;
}

// nibble_lookup_i8 as addends (a table that nibble_table_splits; t0, t1 its entries 0..7, hi0, hi1
// its entries 8..15 each plus one): two byte_perms per word instead of three, and no selector
// arithmetic. prmt reads selector bit 3 as "replicate the picked byte's sign": a looks nibble n up
// in entries 0..7, and for n >= 8 gets the sign of a negative entry, -1; b looks n ^ 8 up in the
// raised entries 8..15, and for n < 8 gets the sign of a non-negative entry, 0. So a + b is entry
// n for every nibble.
LOWBIT_HD Int8Addends nibble_lookup_addends(uint32_t w, uint32_t t0, uint32_t t1, uint32_t hi0, uint32_t hi1) {
  const uint32_t flipped = w ^ 0x88888888u;
  Int8Addends r;
  r.a[0] = byte_perm(t0, t1, w);
  r.a[1] = byte_perm(t0, t1, high_half(w));
  r.b[0] = byte_perm(hi0, hi1, flipped);
  r.b[1] = byte_perm(hi0, hi1, high_half(flipped));
  return r;
}

}  // namespace lowbit
