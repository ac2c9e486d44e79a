// MMQ kernels of the iq4 family (sm_90a; one translation unit per family keeps builds parallel).
#include "cuda/mmq/mmq_kernel.cuh"

namespace lowbit::cuda_detail {
LOWBIT_INSTANTIATE_MMQ(IQ4_NL)
LOWBIT_INSTANTIATE_MMQ(IQ4_XS)
}  // namespace lowbit::cuda_detail
