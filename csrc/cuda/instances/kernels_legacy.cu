// Kernel instantiations for the legacy family (one translation unit per family keeps builds parallel).
#include "cuda/instances/instantiate.h"

namespace lowbit::cuda_detail {
LOWBIT_INSTANTIATE_KERNELS(Q8_0)
LOWBIT_INSTANTIATE_KERNELS(Q5_0)
}  // namespace lowbit::cuda_detail
