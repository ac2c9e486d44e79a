// Building blocks shared by every format definition: the host/device function marker, exact
// scalar conversions (fp16, E8M0, E4M3, E2M1), alignment-aware little-endian loads, and the two
// forms a decoded group of eight weights takes.
//
// Everything here is __host__ __device__ so that the CPU reference and the CUDA kernels run the
// same code on the same bytes.
#pragma once

#include <cstdint>
#include <cstring>

#include "lowbit/formats/codebook_data.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

#if defined(__CUDACC__)
#define LOWBIT_HD __host__ __device__ __forceinline__
#define LOWBIT_UNROLL _Pragma("unroll")
#else
#define LOWBIT_HD inline
#define LOWBIT_UNROLL
#endif

namespace lowbit {

// ---------------------------------------------------------------------------------------------
// Bit casts and scalar formats
// ---------------------------------------------------------------------------------------------

LOWBIT_HD float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

LOWBIT_HD uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

// IEEE binary16 -> binary32, exact for every input (subnormals, infinities, NaN payload kept).
LOWBIT_HD float fp16_to_float(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#endif
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t man = h & 0x3FFu;
  if (exp == 0x1Fu) return bits_to_float(sign | 0x7F800000u | (man << 13));
  if (exp != 0) return bits_to_float(sign | ((exp + 112u) << 23) | (man << 13));
  // zero or subnormal: man * 2^-24, exact in binary32
  const float mag = static_cast<float>(man) * bits_to_float(0x33800000u);  // 2^-24
  return sign ? -mag : mag;
}

// binary32 -> binary16 with round-to-nearest-even, overflow to infinity, NaN kept quiet.
LOWBIT_HD uint16_t float_to_fp16(float f) {
  const uint32_t x = float_to_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax >= 0x7F800000u) return static_cast<uint16_t>(sign | 0x7C00u | (ax > 0x7F800000u ? 0x200u : 0u));
  if (ax >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds past 65504
  if (ax < 0x38800000u) {
    // result is subnormal or zero: value / 2^-24 rounded to nearest even
    if (ax < 0x33000000u) return static_cast<uint16_t>(sign);  // below half of the smallest subnormal
    const uint32_t e = ax >> 23;
    const uint32_t m = (ax & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126u - e;  // 14..24 for e in [102, 112]
    const uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    const uint32_t r = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
    return static_cast<uint16_t>(sign | r);
  }
  const uint32_t rounded = ax + 0xFFFu + ((ax >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

// binary32 -> bfloat16 bits with round-to-nearest-even; NaN stays NaN.
LOWBIT_HD uint16_t float_to_bf16(float f) {
  const uint32_t x = float_to_bits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

LOWBIT_HD float bf16_to_float(uint16_t b) {
  return bits_to_float(static_cast<uint32_t>(b) << 16);
}

// OCP E8M0 scale: 2^(code - 127); 0xFF is NaN. Code 0 is 2^-127, a binary32 subnormal.
LOWBIT_HD float e8m0_to_float(uint8_t code) {
  if (code == 0xFFu) return bits_to_float(0x7FC00000u);
  if (code == 0) return bits_to_float(0x00400000u);
  return bits_to_float(static_cast<uint32_t>(code) << 23);
}

// ggml's E8M0 reading for GGUF MXFP4: 2^(code - 128), i.e. half the OCP scale so that the doubled
// E2M1 codebook lands on the right value; no NaN case (0xFF reads as 2^127).
LOWBIT_HD float e8m0_to_float_half_ggml(uint8_t code) {
  const uint32_t bits = code < 2 ? (0x00200000u << code) : (static_cast<uint32_t>(code - 1) << 23);
  return bits_to_float(bits);
}

// OCP E4M3 (bias 7, no infinities, S.1111.111 is NaN) -> binary32, exact.
LOWBIT_HD float e4m3_to_float(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t exp = (v >> 3) & 0xFu;
  const uint32_t man = v & 0x7u;
  if (exp == 0xFu && man == 0x7u) return bits_to_float(sign | 0x7FC00000u);
  if (exp != 0) return bits_to_float(sign | ((exp + 120u) << 23) | (man << 20));
  const float mag = static_cast<float>(man) * bits_to_float(0x3B000000u);  // man * 2^-9
  return sign ? -mag : mag;
}

// ---------------------------------------------------------------------------------------------
// Byte-level helpers (PTX prmt on the device, the same function in C++ on the host)
// ---------------------------------------------------------------------------------------------

// Byte i of the result is byte (selector >> 4i) & 7 of the 8-byte value (hi:lo); a selector
// nibble with bit 3 set replicates that byte's sign bit instead (PTX prmt default mode).
LOWBIT_HD uint32_t byte_perm(uint32_t lo, uint32_t hi, uint32_t selector) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(lo), "r"(hi), "r"(selector));
  return r;
#else
  const uint64_t v = (static_cast<uint64_t>(hi) << 32) | lo;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t nibble = (selector >> (4 * i)) & 0xFu;
    uint32_t byte = static_cast<uint32_t>(v >> (8 * (nibble & 7u))) & 0xFFu;
    if (nibble & 8u) byte = (byte & 0x80u) ? 0xFFu : 0u;  // prmt's sign-replicate mode
    r |= byte << (8 * i);
  }
  return r;
#endif
}

// Spreads the low 4 bits of `bits` to bytes: bit i -> bit 0 of byte i.
LOWBIT_HD uint32_t spread_bits4(uint32_t bits) {
  // bit i lands at 8i from the four disjoint shifted copies (x<<0, x<<7, x<<14, x<<21)
  return (bits & 0xFu) * 0x00204081u & 0x01010101u;
}
// The same with bit i -> 0x80 in byte i (a sign byte mask).
LOWBIT_HD uint32_t spread_sign_bits4(uint32_t bits) {
  return spread_bits4(bits) << 7;
}

// Parity sign completion shared by the IQ2/IQ3 formats: a 7-bit code stores signs 0..6, and the
// eighth sign makes the count of negatives even. Equals ggml's ksigns_iq2xs table.
LOWBIT_HD uint32_t ksigns_iq2xs(uint32_t code7) {
#if defined(__CUDA_ARCH__)
  return code7 | ((__popc(code7) & 1u) << 7);
#else
  uint32_t parity = code7;
  parity ^= parity >> 4;
  parity ^= parity >> 2;
  parity ^= parity >> 1;
  return code7 | ((parity & 1u) << 7);
#endif
}

// Little-endian loads at a byte address known to be aligned to `kAlign` (1, 2 or 4 bytes).
// On the host memcpy handles any address; on the device a wider load than the alignment allows
// would fault, so the load is split.
template <int kAlign>
LOWBIT_HD uint32_t load_u16(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  if constexpr (kAlign >= 2)
    return *reinterpret_cast<const uint16_t*>(p);
  else
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8);
#else
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
#endif
}

template <int kAlign>
LOWBIT_HD uint32_t load_u32(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  if constexpr (kAlign >= 4)
    return *reinterpret_cast<const uint32_t*>(p);
  else if constexpr (kAlign == 2)
    return static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(p)[0]) |
           (static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(p)[1]) << 16);
  else
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
           (static_cast<uint32_t>(p[3]) << 24);
#else
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}

template <int kAlign>
LOWBIT_HD uint64_t load_u64(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  if constexpr (kAlign >= 8)
    return *reinterpret_cast<const uint64_t*>(p);
  else
    return static_cast<uint64_t>(load_u32<kAlign>(p)) | (static_cast<uint64_t>(load_u32<kAlign>(p + 4)) << 32);
#else
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
#endif
}

// ---------------------------------------------------------------------------------------------
// Decoded groups: what every decode primitive returns for eight consecutive weights
// ---------------------------------------------------------------------------------------------

// Eight weights as exact small magnitudes with signs and one float scale:
//   weight[i] = scale * (negative(i) ? -mag(i) : mag(i))
// mag bytes are <= 128; sign bytes are 0x80 (negative) or 0. A zero weight has no sign (+0 *
// scale, as in ggml), except split MXFP4's code 0b1000, which is OCP MX's -0.0.
// Byte i of word i/4 is weight i.
// Every integer-coded format (all GGUF types, split MXFP4) decodes to this form. Keeping the
// scale apart from exact magnitudes lets one rendering serve all of them, and matches ggml's
// rounding: ggml computes scale * value with one rounding, as does render_f32 below.
struct MagnitudeGroup {
  uint32_t mag[2];
  uint32_t neg[2];
  float scale;
};

// Eight E4M3 elements (byte i of word i/4 is element i) and their block's E8M0 scale as float.
struct Fp8Group {
  uint32_t e4m3[2];
  float scale;
};

LOWBIT_HD uint32_t group_byte(const uint32_t (&words)[2], int i) {
  return (words[i >> 2] >> (8 * (i & 3))) & 0xFFu;
}

// The float value of each weight, exactly as ggml's reference dequantization computes it.
LOWBIT_HD void render_f32(const MagnitudeGroup& g, float* out) {
  LOWBIT_UNROLL
  for (int i = 0; i < 8; ++i) {
    const float m = static_cast<float>(group_byte(g.mag, i));
    out[i] = g.scale * (group_byte(g.neg, i) ? -m : m);
  }
}

LOWBIT_HD void render_f32(const Fp8Group& g, float* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  // the hardware conversion (exact: E4M3 -> fp16 -> fp32) instead of the bit-level decode
  LOWBIT_UNROLL
  for (int p = 0; p < 4; ++p) {
    const __half2_raw h =
        __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(g.e4m3[p >> 1] >> (16 * (p & 1))), __NV_E4M3);
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
    out[2 * p] = g.scale * f.x;
    out[2 * p + 1] = g.scale * f.y;
  }
#else
  LOWBIT_UNROLL
  for (int i = 0; i < 8; ++i) out[i] = g.scale * e4m3_to_float(static_cast<uint8_t>(group_byte(g.e4m3, i)));
#endif
}

// Where a block's bytes are. Split MX types carry their E8M0 scale beside the element bytes.
struct BlockRef {
  const uint8_t* bytes;
  uint8_t split_scale;
};

// Which grid codebook a format decodes through (at most one each).
enum class Codebook : int { kNone, kIq2xxs, kIq2xs, kIq2s, kIq3xxs, kIq3s, kIq1s };

// ---------------------------------------------------------------------------------------------
// The int8 form: what the integer kernels multiply
// ---------------------------------------------------------------------------------------------

// Eight weights as signed int8 (byte i of word i/4), to be multiplied by the scale of their
// scale group (FormatTraits::scale_i8). Which eight weights a group holds is the format's
// I8Order; the activations are gathered in the same order.
struct Int8Group {
  uint32_t q[2];
};

enum class I8Order : int {
  kContiguous,         // group g: weights 8g .. 8g + 7 of the block
  kNibbleInterleaved,  // group g = 4r + t of a 32-weight nibble run r (low nibble j, high j + 16):
                       // weights 32r + {4t, 4t+16, 4t+1, 4t+17 | 4t+2, 4t+18, 4t+3, 4t+19}
};

// Index in the block of byte j (0..7) of int8 group g.
LOWBIT_HD int i8_element(I8Order order, int g, int j) {
  if (order == I8Order::kContiguous) return 8 * g + j;
  const int run = g >> 2, t = g & 3;
  return 32 * run + 4 * t + 2 * (j >> 2) + ((j >> 1) & 1) + 16 * (j & 1);
}

// Eight magnitudes (bytes 1..127) with eight sign bits (bit i negates byte i) as int8. Each sign
// nibble spreads to one bit per byte (spread_sign_bits4); a negated byte
// is (mag ^ 0xFF) + 1, which cannot carry since mag >= 1. Arithmetic rather than a mask table:
// a table's random 16-byte shared-memory reads limited the kernels (ncu: 52% excess wavefronts).
LOWBIT_HD Int8Group apply_sign_bits(uint32_t mag0, uint32_t mag1, uint32_t signs) {
  const uint32_t one0 = spread_sign_bits4(signs) >> 7, one1 = spread_sign_bits4(signs >> 4) >> 7;
  return Int8Group{{(mag0 ^ (one0 * 0xFFu)) + one0, (mag1 ^ (one1 * 0xFFu)) + one1}};
}

// A grid format's int8 group before its signs are applied (FormatTraits::grid_i8): two words of
// magnitudes and eight sign bits (bit i negates byte i; signs < 256). apply_sign_bits gives the
// group; a dot product can also keep the signs apart (the dp4a MMVQ's split signs).
struct GridGroup {
  uint32_t mag[2];
  uint32_t signs;
};

LOWBIT_HD Int8Group apply_sign_bits(const GridGroup& g) {
  return apply_sign_bits(g.mag[0], g.mag[1], g.signs);
}

// A grid format's group by reference (FormatTraits::grid_codes): the grid entries it reads (one
// entry of eight values, or two of four: index[1] then holds weights 4..7), its eight sign bits
// (bit i negates weight i) and its scale. MMQ's bf16 path looks the entries up in a bf16 copy of
// the grid.
struct GridCodes {
  uint32_t index[2];
  uint32_t signs;
  float scale;
};

// A row of the ternary IQ1 grid (int8 -1/0/1 bytes) as eight nibbles grid + 1, element i in
// nibble i: each half is a ready byte_perm selector into a 3-entry value table.
LOWBIT_HD uint32_t pack_ternary_row(uint64_t row) {
  uint32_t r = 0;
  LOWBIT_UNROLL
  for (int i = 0; i < 8; ++i) r |= ((static_cast<uint32_t>(row >> (8 * i)) + 1u) & 0xFu) << (4 * i);
  return r;
}

namespace codebook {
inline constexpr uint8_t kKvaluesIq4nl[16] = {LOWBIT_KVALUES_IQ4NL_DATA};  // int8 as bytes
inline constexpr uint8_t kKvaluesMxfp4[16] = {LOWBIT_KVALUES_MXFP4_DATA};  // int8 as bytes

// Little-endian word i of a 16-byte table, for byte_perm lookups in registers.
constexpr uint32_t table_word(const uint8_t (&t)[16], int i) {
  return static_cast<uint32_t>(t[4 * i]) | (static_cast<uint32_t>(t[4 * i + 1]) << 8) |
         (static_cast<uint32_t>(t[4 * i + 2]) << 16) | (static_cast<uint32_t>(t[4 * i + 3]) << 24);
}
}  // namespace codebook

// A codebook table as a decoder reads it: entry i at table[i * stride]. A kernel whose lanes look
// up random entries may keep `stride` interleaved copies and point each lane at its own copy
// (table + lane % stride), so that a warp's lookups fall into distinct shared-memory banks.
template <class T>
struct GridRef {
  const T* table = nullptr;
  int stride = 1;
  GridRef() = default;
  LOWBIT_HD GridRef(const T* t) : table(t) {}  // NOLINT: a plain table is a GridRef of stride 1
  LOWBIT_HD GridRef(const T* t, int s) : table(t), stride(s) {}
  LOWBIT_HD T operator[](uint32_t i) const { return table[i * static_cast<uint32_t>(stride)]; }
};

// The I-quant codebooks, wherever they live (host tables, device global or shared memory).
// A kernel fills only the grid pointers its type uses. iq1s_packed (pack_ternary_row of each
// iq1s row) serves the int8 decoder of IQ1_S / IQ1_M.
struct Codebooks {
  GridRef<uint64_t> iq2xxs_grid;
  GridRef<uint64_t> iq2xs_grid;
  GridRef<uint64_t> iq2s_grid;
  GridRef<uint32_t> iq3xxs_grid;
  GridRef<uint32_t> iq3s_grid;
  GridRef<uint64_t> iq1s_grid;
  GridRef<uint32_t> iq1s_packed;
  // The 16-entry int8 tables of the nibble formats (IQ4_NL / IQ4_XS, and MXFP4's doubled E2M1
  // values) as four words each, for nibble_lookup_i8; right by default. Held by value: the device
  // kernels load them once (load_nibble_tables) so that they stay in registers; as compile-time
  // constants the compiler rematerialized two of the four words before every lookup (16
  // instructions per 32 weights).
  uint32_t iq4nl_i8[4] = {
      codebook::table_word(codebook::kKvaluesIq4nl, 0), codebook::table_word(codebook::kKvaluesIq4nl, 1),
      codebook::table_word(codebook::kKvaluesIq4nl, 2), codebook::table_word(codebook::kKvaluesIq4nl, 3)};
  uint32_t e2m1_i8[4] = {
      codebook::table_word(codebook::kKvaluesMxfp4, 0), codebook::table_word(codebook::kKvaluesMxfp4, 1),
      codebook::table_word(codebook::kKvaluesMxfp4, 2), codebook::table_word(codebook::kKvaluesMxfp4, 3)};
};

}  // namespace lowbit

namespace lowbit {

// Eight nibbles (bytes with values 0..15 in two words) -> selector for byte_perm of their low
// three bits: nibble i of the result is byte i & 7.
LOWBIT_HD uint32_t nibble_selector(uint32_t bytes) {
  const uint32_t t = (bytes & 0x07070707u) | ((bytes & 0x07070707u) >> 4);
  return (t & 0xFFu) | ((t >> 8) & 0xFF00u);
}

// Per-byte 0x80 where the byte is non-zero, for bytes <= 0x7F.
LOWBIT_HD uint32_t nonzero_bytes(uint32_t bytes) {
  return (bytes + 0x7F7F7F7Fu) & 0x80808080u;
}

// Per-byte 0xFF where the byte has 0x80 set.
LOWBIT_HD uint32_t expand_sign_bytes(uint32_t bytes) {
  return ((bytes >> 7) & 0x01010101u) * 0xFFu;
}

// Any decoded magnitude group as int8 (sign bytes are 0 where the magnitude is 0: no carries).
LOWBIT_HD Int8Group int8_from_magnitudes(const MagnitudeGroup& g) {
  const uint32_t one0 = g.neg[0] >> 7, one1 = g.neg[1] >> 7;
  return Int8Group{{(g.mag[0] ^ (one0 * 0xFFu)) + one0, (g.mag[1] ^ (one1 * 0xFFu)) + one1}};
}

// w >> 16. On the device through the multiplier (mul.hi by 2^16: the FMA pipe) instead of a shift
// (the integer ALU pipe, which the nibble lookups' byte_perms already fill).
LOWBIT_HD uint32_t high_half(uint32_t w) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  asm("mul.hi.u32 %0, %1, 65536;" : "=r"(r) : "r"(w));
  return r;
#else
  return w >> 16;
#endif
}

// Eight packed nibbles (a 32-bit word) looked up in a 16-entry int8 table held as four words.
// Byte i of the result pair is the entry of nibble i: q[0] from nibbles 0..3, q[1] from 4..7.
// The low and high halves of the table are looked up with bit 3 cleared, then picked per byte.
LOWBIT_HD Int8Group nibble_lookup_i8(uint32_t w, uint32_t t0, uint32_t t1, uint32_t t2, uint32_t t3) {
  const uint32_t sel = w & 0x77777777u;
  const uint32_t pick = ((w >> 1) & 0x44444444u) | 0x32103210u;  // byte i of lo, or of hi (i + 4)
  Int8Group r;
  r.q[0] = byte_perm(byte_perm(t0, t1, sel), byte_perm(t2, t3, sel), pick);
  r.q[1] = byte_perm(byte_perm(t0, t1, high_half(sel)), byte_perm(t2, t3, high_half(sel)), high_half(pick));
  return r;
}

}  // namespace lowbit
