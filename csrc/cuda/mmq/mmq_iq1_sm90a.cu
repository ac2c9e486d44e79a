// MMQ kernels (dense and grouped for MoE) of the iq1 family (sm_90a; one translation unit per family keeps builds
// parallel).
#include "cuda/mmq/mmq_grouped_kernel.cuh"

namespace lowbit::cuda_detail {
LOWBIT_INSTANTIATE_MMQ(IQ1_S)
LOWBIT_INSTANTIATE_MOE_GROUPED_MMQ(IQ1_S)
LOWBIT_INSTANTIATE_MMQ(IQ1_M)
LOWBIT_INSTANTIATE_MOE_GROUPED_MMQ(IQ1_M)
}  // namespace lowbit::cuda_detail
