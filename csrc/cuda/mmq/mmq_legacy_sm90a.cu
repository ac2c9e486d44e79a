// MMQ kernels (dense and grouped for MoE) of the legacy family (sm_90a; one translation unit per family keeps builds
// parallel).
#include "cuda/mmq/mmq_grouped_kernel.cuh"

namespace lowbit::cuda_detail {
LOWBIT_INSTANTIATE_MMQ(Q5_0)
LOWBIT_INSTANTIATE_MOE_GROUPED_MMQ(Q5_0)
LOWBIT_INSTANTIATE_MMQ(Q8_0)
LOWBIT_INSTANTIATE_MOE_GROUPED_MMQ(Q8_0)
}  // namespace lowbit::cuda_detail
