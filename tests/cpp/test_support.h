// Helpers shared by the C++ test suites (CPU reference and CUDA API).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "lowbit/error.h"
#include "lowbit/formats/common.h"
#include "lowbit/quant_type.h"
#include "lowbit/weights.h"

namespace lowbit::test {

// What f throws as lowbit::Error, or "no error".
template <class F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return std::string(e.what());
  }
  return std::string("no error");
}

// Random bytes for rows x k weights of type t with realistic scales: fp16 d near 2^-9 (IQ1_M's
// hidden in its four scale words), E8M0 near 2^-5 for GGUF MXFP4, no NaN E4M3 elements.
inline std::vector<uint8_t> random_weight(QuantType t, int64_t rows, int64_t k, std::mt19937& rng) {
  const TypeInfo& info = *find_type(static_cast<int64_t>(t));
  std::vector<uint8_t> w(static_cast<size_t>(rows * row_bytes(t, k)));
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> d(1e-3f, 4e-3f);
  for (size_t i = 0; i < w.size(); i += info.block_bytes) {
    if (t == QuantType::MXFP8_E4M3) {
      for (size_t j = i; j < i + info.block_bytes; ++j)
        if ((w[j] & 0x7F) == 0x7F) w[j] ^= 1;  // no NaN elements
    } else if (t == QuantType::MXFP4) {
      w[i] = static_cast<uint8_t>(118 + rng() % 10);  // E8M0 exponent near 2^-5
    } else if (t == QuantType::IQ1_M) {
      const uint16_t h = float_to_fp16(d(rng));  // the fp16 scale hides in four top nibbles
      for (int q = 0; q < 4; ++q) {
        uint16_t word;
        std::memcpy(&word, &w[i + 48 + 2 * q], 2);
        word = static_cast<uint16_t>((word & 0x0FFF) | (((h >> (4 * q)) & 0xF) << 12));
        std::memcpy(&w[i + 48 + 2 * q], &word, 2);
      }
    } else if (!info.split_scales) {
      const uint16_t h = float_to_fp16(d(rng));
      std::memcpy(&w[i], &h, 2);
    }
  }
  return w;
}

}  // namespace lowbit::test
