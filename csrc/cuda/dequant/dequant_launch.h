// The seam between the C++ API (api/api.cu) and the dequantize instantiations (instances/):
// the argument struct and the per-type launcher.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "lowbit/cpu.h"
#include "lowbit/quant_type.h"

namespace lowbit::cuda_detail {

struct DequantArgs {
  const uint8_t* data;
  int64_t row_stride;  // bytes
  const uint8_t* scales;
  int64_t scale_row_stride;
  int64_t rows;
  int64_t k;
  void* out;
  int64_t out_row_stride;  // elements
};

template <QuantType T>
void launch_dequant(const DequantArgs& a, FloatType out_type, cudaStream_t stream);

}  // namespace lowbit::cuda_detail
