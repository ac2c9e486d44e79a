// MMQ kernels (dense and grouped for MoE) of the mx family (sm_90a; one translation unit per family keeps builds
// parallel).
#include "cuda/mmq/mmq_grouped_kernel.cuh"

namespace lowbit::cuda_detail {
LOWBIT_INSTANTIATE_MMQ(MXFP4)
LOWBIT_INSTANTIATE_MOE_GROUPED_MMQ(MXFP4)
LOWBIT_INSTANTIATE_MMQ(MXFP8_E4M3)
LOWBIT_INSTANTIATE_MOE_GROUPED_MMQ(MXFP8_E4M3)
LOWBIT_INSTANTIATE_MMQ(MXFP4_SPLIT)
LOWBIT_INSTANTIATE_MOE_GROUPED_MMQ(MXFP4_SPLIT)
}  // namespace lowbit::cuda_detail
