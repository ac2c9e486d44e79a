// The CUDA ops' alignment of their operands: the kernels read weights from a 16-byte aligned base,
// so a view that starts mid-way (a row slice whose row_bytes is not a multiple of 16) is copied
// once into fresh storage.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "tensor_args.h"

namespace lowbit::torch_ops {

inline bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// arg, pointing at `keep` (a copy of w) where w's data is not 16-byte aligned.
inline WeightArg aligned_weight(WeightArg arg, const at::Tensor& w, at::Tensor& keep) {
  if (!aligned16(w.data_ptr())) {
    keep = w.clone();
    arg.view.data = keep.data_ptr();
  }
  return arg;
}

}  // namespace lowbit::torch_ops
