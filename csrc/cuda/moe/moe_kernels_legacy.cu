// MoE kernel instantiations for the legacy family (one translation unit per family keeps builds parallel).
#include "cuda/moe/moe_batched_kernel.cuh"
#include "cuda/moe/moe_vec_kernel.cuh"

namespace lowbit::cuda_detail {
LOWBIT_INSTANTIATE_MOE_KERNELS(Q5_0)
LOWBIT_INSTANTIATE_MOE_KERNELS(Q8_0)
}  // namespace lowbit::cuda_detail
