// Kernel instantiations for the iq2 family (one translation unit per family keeps builds parallel).
#include "cuda/instances/instantiate.h"

namespace lowbit::cuda_detail {
LOWBIT_INSTANTIATE_KERNELS(IQ2_XXS)
LOWBIT_INSTANTIATE_KERNELS(IQ2_XS)
LOWBIT_INSTANTIATE_KERNELS(IQ2_S)
}  // namespace lowbit::cuda_detail
