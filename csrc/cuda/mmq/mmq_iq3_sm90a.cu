// MMQ kernels of the iq3 family (sm_90a; one translation unit per family keeps builds parallel).
#include "cuda/mmq/mmq_kernel.cuh"

namespace lowbit::cuda_detail {
LOWBIT_INSTANTIATE_MMQ(IQ3_XXS)
LOWBIT_INSTANTIATE_MMQ(IQ3_S)
}  // namespace lowbit::cuda_detail
