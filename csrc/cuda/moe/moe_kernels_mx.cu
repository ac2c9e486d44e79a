// MoE kernel instantiations for the mx family (one translation unit per family keeps builds parallel).
#include "cuda/moe/moe_batched_kernel.cuh"
#include "cuda/moe/moe_vec_kernel.cuh"

namespace lowbit::cuda_detail {
LOWBIT_INSTANTIATE_MOE_KERNELS(MXFP4)
LOWBIT_INSTANTIATE_MOE_KERNELS(MXFP8_E4M3)
LOWBIT_INSTANTIATE_MOE_KERNELS(MXFP4_SPLIT)
}  // namespace lowbit::cuda_detail
