// Kernel instantiations for the iq4 family (one translation unit per family keeps builds parallel).
#include "cuda/instances/instantiate.h"

namespace lowbit::cuda_detail {
LOWBIT_INSTANTIATE_KERNELS(IQ4_NL)
LOWBIT_INSTANTIATE_KERNELS(IQ4_XS)
}  // namespace lowbit::cuda_detail
