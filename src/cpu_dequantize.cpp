// CPU reference dequantization: every format through its FormatTraits decode primitive.
#include <cstring>
#include <vector>

#include "lowbit/cpu.h"
#include "lowbit/error.h"
#include "lowbit/formats/all.h"

namespace lowbit::cpu {
namespace {

template <class Traits>
void dequantize_row(const uint8_t* row, const uint8_t* scales, int64_t k, const Codebooks& cb, float* out) {
  constexpr int kGroups = Traits::kBlockElems / kGroupElems;
  const int64_t blocks = k / Traits::kBlockElems;
  for (int64_t b = 0; b < blocks; ++b) {
    const BlockRef ref{row + b * Traits::kBlockBytes, scales ? scales[b] : uint8_t{0}};
    for (int g = 0; g < kGroups; ++g)
      decode_group_f32<Traits>(ref, g, cb, out + b * Traits::kBlockElems + g * kGroupElems);
  }
}

void store_row(const float* src, int64_t k, void* dst, FloatType type) {
  switch (type) {
    case FloatType::F32:
      std::memcpy(dst, src, static_cast<size_t>(k) * sizeof(float));
      return;
    case FloatType::BF16:
      for (int64_t i = 0; i < k; ++i) static_cast<uint16_t*>(dst)[i] = float_to_bf16(src[i]);
      return;
    case FloatType::F16:
      for (int64_t i = 0; i < k; ++i) static_cast<uint16_t*>(dst)[i] = float_to_fp16(src[i]);
      return;
  }
  detail::fail("dtype: unsupported output float type ", static_cast<int>(type));
}

size_t element_size(FloatType type) {
  return type == FloatType::F32 ? 4 : 2;
}

}  // namespace

void dequantize(QuantType t, const WeightView& w, int64_t rows, int64_t k, void* out, FloatType out_type,
                int64_t out_row_stride) {
  const int64_t bytes = row_bytes(t, k);
  LOWBIT_CHECK(rows >= 0, "rows: must be >= 0, got ", rows);
  LOWBIT_CHECK(w.data != nullptr || rows == 0, "w: data pointer is null");
  LOWBIT_CHECK(w.row_stride >= bytes || rows <= 1, "w: row stride ", w.row_stride, " is shorter than a row (", bytes,
               " bytes)");
  LOWBIT_CHECK(out != nullptr || rows == 0, "out: pointer is null");
  LOWBIT_CHECK(!weight_type_info(static_cast<int64_t>(t)).split_scales || w.scale_row_stride >= k / 32 || rows <= 1,
               "scales: row stride ", w.scale_row_stride, " is shorter than a row of scales (K/32 = ", k / 32, ")");
  LOWBIT_CHECK(out_row_stride >= k || rows <= 1, "out: row stride ", out_row_stride, " is shorter than K = ", k);
  const bool split = weight_type_info(static_cast<int64_t>(t)).split_scales;
  LOWBIT_CHECK(!split || w.scales != nullptr || rows == 0, "scales: ", type_name(t),
               " keeps its E8M0 scales in a separate tensor, which is missing");
  const Codebooks cb = host_codebooks();
  std::vector<float> buffer(static_cast<size_t>(k));
  visit_weight_type(t, [&](auto traits) {
    using Traits = decltype(traits);
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* row = static_cast<const uint8_t*>(w.data) + r * w.row_stride;
      const uint8_t* scales = split ? w.scales + r * w.scale_row_stride : nullptr;
      void* dst = static_cast<uint8_t*>(out) + static_cast<size_t>(r * out_row_stride) * element_size(out_type);
      if (out_type == FloatType::F32) {
        dequantize_row<Traits>(row, scales, k, cb, static_cast<float*>(dst));
      } else {
        dequantize_row<Traits>(row, scales, k, cb, buffer.data());
        store_row(buffer.data(), k, dst, out_type);
      }
    }
  });
}

}  // namespace lowbit::cpu
