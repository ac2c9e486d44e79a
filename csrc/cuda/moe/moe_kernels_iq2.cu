// MoE kernel instantiations for the iq2 family (one translation unit per family keeps builds parallel).
#include "cuda/moe/moe_batched_kernel.cuh"
#include "cuda/moe/moe_vec_kernel.cuh"

namespace lowbit::cuda_detail {
LOWBIT_INSTANTIATE_MOE_KERNELS(IQ2_XXS)
LOWBIT_INSTANTIATE_MOE_KERNELS(IQ2_XS)
LOWBIT_INSTANTIATE_MOE_KERNELS(IQ2_S)
}  // namespace lowbit::cuda_detail
