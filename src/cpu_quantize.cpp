// CPU quantizers: MX (split MXFP8 / MXFP4 and GGUF MXFP4) with a selectable scale rule, and
// ggml's reference Q8_0 / Q8_1 block quantization (same operation order, so bit-exact).
#include <cmath>
#include <cstring>

#include "lowbit/cpu.h"
#include "lowbit/error.h"
#include "lowbit/formats/all.h"
#include "lowbit/formats/mx_codec.h"

namespace lowbit::cpu {
namespace {

// Largest magnitude of a block; NaN when any element is NaN.
float block_amax(const float* x, int n) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (std::isnan(a)) return a;
    if (a > amax) amax = a;
  }
  return amax;
}

void require_finite_block(float amax, QuantType t, int64_t row, int64_t block) {
  LOWBIT_CHECK(std::isfinite(amax), "w: row ", row, " block ", block, " holds NaN or Inf, which ", type_name(t),
               " cannot represent");
}

// The block's fp16 scale (and Q8_1's scaled sum) must be finite: |x| up to about 65504 * 127.
void require_fp16_scale(uint16_t h, float amax, QuantType t, int64_t row, int64_t block) {
  LOWBIT_CHECK(std::isfinite(fp16_to_float(h)), "w: row ", row, " block ", block, " reaches |x| = ", amax, ", whose ",
               type_name(t), " float16 scale overflows (|x| must stay below about 8.3e6)");
}

template <class Spec>
void quantize_split_row(const float* x, int64_t k, ScaleRule rule, uint8_t* elements, uint8_t* scales) {
  for (int64_t b = 0; b < k / kMxBlock; ++b) {
    const float* xb = x + b * kMxBlock;
    const uint8_t code = mx_scale_code<Spec>(block_amax(xb, kMxBlock), rule);
    scales[b] = code;
    if constexpr (Spec::kMantBits == 3) {
      for (int i = 0; i < kMxBlock; ++i)
        elements[b * kMxBlock + i] = static_cast<uint8_t>(encode_mx_element<Spec>(xb[i], code));
    } else {
      for (int i = 0; i < kMxBlock / 2; ++i) {
        const uint32_t even = encode_mx_element<Spec>(xb[2 * i], code);
        const uint32_t odd = encode_mx_element<Spec>(xb[2 * i + 1], code);
        elements[b * kMxBlock / 2 + i] = static_cast<uint8_t>(even | (odd << 4));
      }
    }
  }
}

void quantize_mxfp4_gguf_row(const float* x, int64_t k, ScaleRule rule, int64_t row, uint8_t* out) {
  for (int64_t b = 0; b < k / kMxBlock; ++b) {
    const float* xb = x + b * kMxBlock;
    const float amax = block_amax(xb, kMxBlock);
    require_finite_block(amax, QuantType::MXFP4, row, b);
    BlockMxfp4 blk{};
    // GGUF stores the OCP exponent; ggml reads it as half the scale against doubled codes.
    blk.e = mx_scale_code<E2M1Spec>(amax, rule);
    for (int j = 0; j < 16; ++j) {
      const uint32_t lo = encode_mx_element<E2M1Spec>(xb[j], blk.e);
      const uint32_t hi = encode_mx_element<E2M1Spec>(xb[j + 16], blk.e);
      blk.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
    std::memcpy(out + b * sizeof blk, &blk, sizeof blk);
  }
}

// ggml's quantize_row_q8_0_ref / quantize_row_q8_1_ref, operation for operation.
template <bool kWithSum>
void quantize_q8_row(const float* x, int64_t k, QuantType t, int64_t row, uint8_t* out) {
  constexpr size_t kBytes = kWithSum ? sizeof(BlockQ8_1) : sizeof(BlockQ8_0);
  for (int64_t b = 0; b < k / 32; ++b) {
    const float* xb = x + b * 32;
    const float amax = block_amax(xb, 32);
    require_finite_block(amax, t, row, b);
    const float d = amax / ((1 << 7) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int8_t qs[32];
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      qs[j] = static_cast<int8_t>(std::round(xb[j] * id));
      sum += qs[j];
    }
    uint8_t* dst = out + b * kBytes;
    const uint16_t dh = float_to_fp16(d);
    require_fp16_scale(dh, amax, t, row, b);
    std::memcpy(dst, &dh, 2);
    if constexpr (kWithSum) {
      const uint16_t sh = float_to_fp16(static_cast<float>(sum) * d);
      require_fp16_scale(sh, amax, t, row, b);
      std::memcpy(dst + 2, &sh, 2);
      std::memcpy(dst + 4, qs, 32);
    } else {
      std::memcpy(dst + 2, qs, 32);
    }
  }
}

}  // namespace

void quantize(QuantType t, const float* x, int64_t rows, int64_t k, ScaleRule rule, uint8_t* data, uint8_t* scales) {
  const TypeInfo* info = find_type(static_cast<int64_t>(t));
  LOWBIT_CHECK(info != nullptr && info->has_quantizer, "qtype: lowbit has no quantizer for ",
               info ? info->name : "this id", " (it quantizes to mxfp8_e4m3, mxfp4_split, mxfp4, q8_0, q8_1)");
  LOWBIT_CHECK(rows >= 0, "rows: must be >= 0, got ", rows);
  LOWBIT_CHECK(k > 0 && k % info->block_elems == 0, "k: K = ", k, " must be a positive multiple of ", info->block_elems,
               " to quantize to ", info->name);
  LOWBIT_CHECK(rule == ScaleRule::kOcpFloor || rule == ScaleRule::kRoundUp, "scale_rule: unknown rule ",
               static_cast<int>(rule));
  LOWBIT_CHECK(rows == 0 || (x != nullptr && data != nullptr), "x/data: null pointer");
  LOWBIT_CHECK(rows == 0 || !info->split_scales || scales != nullptr, "scales: ", info->name,
               " needs an output for its E8M0 scales");
  const int64_t bytes = k / info->block_elems * info->block_bytes;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * k;
    uint8_t* out = data + r * bytes;
    switch (t) {
      case QuantType::MXFP8_E4M3:
        quantize_split_row<E4M3Spec>(xr, k, rule, out, scales + r * (k / kMxBlock));
        break;
      case QuantType::MXFP4_SPLIT:
        quantize_split_row<E2M1Spec>(xr, k, rule, out, scales + r * (k / kMxBlock));
        break;
      case QuantType::MXFP4:
        quantize_mxfp4_gguf_row(xr, k, rule, r, out);
        break;
      case QuantType::Q8_0:
        quantize_q8_row<false>(xr, k, t, r, out);
        break;
      case QuantType::Q8_1:
        quantize_q8_row<true>(xr, k, t, r, out);
        break;
      default:
        detail::fail("qtype: no quantizer for ", info->name);
    }
  }
}

}  // namespace lowbit::cpu
