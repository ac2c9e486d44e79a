// The activation of a gated MoE projection, act(gate) * up: cpu::activate's definitions in float32,
// shared by the MoE kernels and the int8 MMVQ's pairs mode.
#pragma once

#include "lowbit/cpu.h"

namespace lowbit::cuda_detail {

__device__ __forceinline__ float moe_activate(Activation a, float v) {
  switch (a) {
    case Activation::kSiLU:
      return v / (1.0f + expf(-v));
    case Activation::kGELU:
      return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case Activation::kGELUTanh:
      return 0.5f * v * (1.0f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v)));
  }
  return v;
}

}  // namespace lowbit::cuda_detail
