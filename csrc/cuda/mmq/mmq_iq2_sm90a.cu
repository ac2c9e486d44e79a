// MMQ kernels (dense and grouped for MoE) of the iq2 family (sm_90a; one translation unit per family keeps builds
// parallel).
#include "cuda/mmq/mmq_grouped_kernel.cuh"

namespace lowbit::cuda_detail {
LOWBIT_INSTANTIATE_MMQ(IQ2_XXS)
LOWBIT_INSTANTIATE_MOE_GROUPED_MMQ(IQ2_XXS)
LOWBIT_INSTANTIATE_MMQ(IQ2_XS)
LOWBIT_INSTANTIATE_MOE_GROUPED_MMQ(IQ2_XS)
LOWBIT_INSTANTIATE_MMQ(IQ2_S)
LOWBIT_INSTANTIATE_MOE_GROUPED_MMQ(IQ2_S)
}  // namespace lowbit::cuda_detail
