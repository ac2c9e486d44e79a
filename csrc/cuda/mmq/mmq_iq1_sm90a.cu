// MMQ kernels of the iq1 family (sm_90a; one translation unit per family keeps builds parallel).
#include "cuda/mmq/mmq_kernel.cuh"

namespace lowbit::cuda_detail {
LOWBIT_INSTANTIATE_MMQ(IQ1_S)
LOWBIT_INSTANTIATE_MMQ(IQ1_M)
}  // namespace lowbit::cuda_detail
