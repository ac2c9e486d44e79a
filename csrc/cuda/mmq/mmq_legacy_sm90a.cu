// MMQ kernels of the legacy family (sm_90a; one translation unit per family keeps builds parallel).
#include "cuda/mmq/mmq_kernel.cuh"

namespace lowbit::cuda_detail {
LOWBIT_INSTANTIATE_MMQ(Q5_0)
LOWBIT_INSTANTIATE_MMQ(Q8_0)
}  // namespace lowbit::cuda_detail
