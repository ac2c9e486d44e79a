// MMQ kernels (dense and grouped for MoE) of the iq4 family (sm_90a; one translation unit per family keeps builds
// parallel).
#include "cuda/mmq/mmq_grouped_kernel.cuh"

namespace lowbit::cuda_detail {
LOWBIT_INSTANTIATE_MMQ(IQ4_NL)
LOWBIT_INSTANTIATE_MOE_GROUPED_MMQ(IQ4_NL)
LOWBIT_INSTANTIATE_MMQ(IQ4_XS)
LOWBIT_INSTANTIATE_MOE_GROUPED_MMQ(IQ4_XS)
}  // namespace lowbit::cuda_detail
