// MMQ kernels (dense and grouped for MoE) of the iq3 family (sm_90a; one translation unit per family keeps builds
// parallel).
#include "cuda/mmq/mmq_grouped_kernel.cuh"

namespace lowbit::cuda_detail {
LOWBIT_INSTANTIATE_MMQ(IQ3_XXS)
LOWBIT_INSTANTIATE_MOE_GROUPED_MMQ(IQ3_XXS)
LOWBIT_INSTANTIATE_MMQ(IQ3_S)
LOWBIT_INSTANTIATE_MOE_GROUPED_MMQ(IQ3_S)
}  // namespace lowbit::cuda_detail
