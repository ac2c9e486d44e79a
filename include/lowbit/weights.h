// How a quantized weight sits in memory, and the shape rules every entry point checks.
#pragma once

#include <cstdint>

#include "lowbit/quant_type.h"

namespace lowbit {

// A quantized weight: `rows` rows of K weights. GGUF types keep each row as consecutive blocks
// (the file's bytes, [rows, row_bytes]); split MX types keep elements and E8M0 scales apart.
// 3-D (MoE) weights add a stride between experts. Strides are in bytes. The CUDA entry points also
// require data 16-byte aligned and the row and expert strides multiples of the block alignment the
// format's decode reads with (2 bytes for most GGUF types, 8 for IQ4_XS and IQ1_M, 16 for split MX,
// 1 for GGUF MXFP4; whole rows of blocks always are): their kernels stage rows in spans sized by it.
struct WeightView {
  const void* data = nullptr;
  int64_t row_stride = 0;
  int64_t expert_stride = 0;
  const uint8_t* scales = nullptr;  // split MX types: [rows, K/32] E8M0 codes
  int64_t scale_row_stride = 0;
  int64_t scale_expert_stride = 0;
};

// Bytes of one row of k weights (the elements tensor for split MX types). Throws lowbit::Error
// naming `arg` when k is not a positive whole number of blocks.
int64_t row_bytes(QuantType t, int64_t k, const char* arg = "k");

// K from the bytes of one row; throws naming `arg` when row_bytes is not whole blocks.
int64_t k_from_row_bytes(QuantType t, int64_t row_bytes, const char* arg = "w");

// Number of E8M0 scales per row for split MX types (K / 32), 0 for GGUF types.
int64_t scales_per_row(QuantType t, int64_t k);

}  // namespace lowbit
