// Kernel instantiations for the iq3 family (one translation unit per family keeps builds parallel).
#include "cuda/instances/instantiate.h"

namespace lowbit::cuda_detail {
LOWBIT_INSTANTIATE_KERNELS(IQ3_XXS)
LOWBIT_INSTANTIATE_KERNELS(IQ3_S)
}  // namespace lowbit::cuda_detail
