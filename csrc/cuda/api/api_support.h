// What the C++ CUDA API's entry points share (api.cu, mmq/mmq_api.cu, moe/moe_api.cu): the weight's
// argument checks, the no-overlap rule of an output and its input, and the stream-ordered
// workspace taken where the caller passes none.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "lowbit/quant_type.h"
#include "lowbit/weights.h"

namespace lowbit::cuda_detail {

// A weight of `rows` rows of K: its type, K, pointer (16-byte aligned), row strides (whole rows,
// blocks at their alignment) and, for split MX types, the scales. `op` names the caller.
void check_weight(QuantType t, const WeightView& w, int64_t rows, int64_t k, const char* op);

// y [rows, y_cols] (row stride y_row_stride, y_elem bytes each) must not overlap x [rows, x_cols]:
// blocks of one kernel read x while others write y.
void check_no_overlap(const void* x, int64_t x_elem, int64_t x_row_stride, int64_t x_cols, const void* y,
                      int64_t y_elem, int64_t y_row_stride, int64_t y_cols, int64_t rows);

// Device memory taken from the stream's pool and freed on the stream after the kernels, also when
// a launch throws.
struct StreamOrderedBuffer {
  void* ptr = nullptr;
  cudaStream_t stream;
  ~StreamOrderedBuffer();
};

// `workspace` or, where it is null and `need` > 0, a stream-ordered allocation held by `owned`;
// `op` names the caller in the error.
void* workspace_or_allocate(void* workspace, size_t need, StreamOrderedBuffer& owned, cudaStream_t stream,
                            const char* op);

}  // namespace lowbit::cuda_detail
