// MoE kernel instantiations for the iq4 family (one translation unit per family keeps builds parallel).
#include "cuda/moe/moe_batched_kernel.cuh"
#include "cuda/moe/moe_vec_kernel.cuh"

namespace lowbit::cuda_detail {
LOWBIT_INSTANTIATE_MOE_KERNELS(IQ4_NL)
LOWBIT_INSTANTIATE_MOE_KERNELS(IQ4_XS)
}  // namespace lowbit::cuda_detail
