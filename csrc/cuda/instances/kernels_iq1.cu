// Kernel instantiations for the iq1 family (one translation unit per family keeps builds parallel).
#include "cuda/instances/instantiate.h"

namespace lowbit::cuda_detail {
LOWBIT_INSTANTIATE_KERNELS(IQ1_S)
LOWBIT_INSTANTIATE_KERNELS(IQ1_M)
}  // namespace lowbit::cuda_detail
