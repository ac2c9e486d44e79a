// Host copies of the I-quant codebooks (format data generated from gguf-py into codebook_data.h)
// and the Codebooks view the CPU reference decodes with. Device copies live in csrc/cuda.
#pragma once

#include <array>
#include <cstdint>

#include "lowbit/formats/codebook_data.h"
#include "lowbit/formats/common.h"

namespace lowbit {

namespace codebook {
inline constexpr uint64_t kIq2xxsGrid[LOWBIT_IQ2XXS_GRID_SIZE] = {LOWBIT_IQ2XXS_GRID_DATA};
inline constexpr uint64_t kIq2xsGrid[LOWBIT_IQ2XS_GRID_SIZE] = {LOWBIT_IQ2XS_GRID_DATA};
inline constexpr uint64_t kIq2sGrid[LOWBIT_IQ2S_GRID_SIZE] = {LOWBIT_IQ2S_GRID_DATA};
inline constexpr uint32_t kIq3xxsGrid[LOWBIT_IQ3XXS_GRID_SIZE] = {LOWBIT_IQ3XXS_GRID_DATA};
inline constexpr uint32_t kIq3sGrid[LOWBIT_IQ3S_GRID_SIZE] = {LOWBIT_IQ3S_GRID_DATA};
inline constexpr uint64_t kIq1sGrid[LOWBIT_IQ1S_GRID_SIZE] = {LOWBIT_IQ1S_GRID_DATA};
// ggml's sign table; decoders compute it (ksigns_iq2xs), tests check the two agree.
inline constexpr uint8_t kKsignsIq2xs[128] = {LOWBIT_KSIGNS_IQ2XS_DATA};
// kKvaluesIq4nl, kKvaluesMxfp4 and table_word: common.h (Codebooks' nibble tables)
constexpr uint8_t abs_i8(uint8_t b) {
  return b & 0x80u ? static_cast<uint8_t>(0x100u - b) : b;
}
}  // namespace codebook

// The packed IQ1 grid for the int8 decoders (built once, on first use).
inline const uint32_t* host_iq1s_packed() {
  static const std::array<uint32_t, LOWBIT_IQ1S_GRID_SIZE> table = [] {
    std::array<uint32_t, LOWBIT_IQ1S_GRID_SIZE> t{};
    for (int i = 0; i < LOWBIT_IQ1S_GRID_SIZE; ++i) t[i] = pack_ternary_row(codebook::kIq1sGrid[i]);
    return t;
  }();
  return table.data();
}

inline Codebooks host_codebooks() {
  Codebooks cb;
  cb.iq2xxs_grid = codebook::kIq2xxsGrid;
  cb.iq2xs_grid = codebook::kIq2xsGrid;
  cb.iq2s_grid = codebook::kIq2sGrid;
  cb.iq3xxs_grid = codebook::kIq3xxsGrid;
  cb.iq3s_grid = codebook::kIq3sGrid;
  cb.iq1s_grid = codebook::kIq1sGrid;
  cb.iq1s_packed = host_iq1s_packed();
  return cb;  // the nibble tables: Codebooks' defaults
}

}  // namespace lowbit
