// MoE kernel instantiations for the iq1 family (one translation unit per family keeps builds parallel).
#include "cuda/moe/moe_batched_kernel.cuh"
#include "cuda/moe/moe_vec_kernel.cuh"

namespace lowbit::cuda_detail {
LOWBIT_INSTANTIATE_MOE_KERNELS(IQ1_S)
LOWBIT_INSTANTIATE_MOE_KERNELS(IQ1_M)
}  // namespace lowbit::cuda_detail
