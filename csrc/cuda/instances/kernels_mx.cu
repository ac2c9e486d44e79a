// Kernel instantiations for the mx family (one translation unit per family keeps builds parallel).
#include "cuda/instances/instantiate.h"

namespace lowbit::cuda_detail {
LOWBIT_INSTANTIATE_KERNELS(MXFP4)
LOWBIT_INSTANTIATE_KERNELS(MXFP8_E4M3)
LOWBIT_INSTANTIATE_KERNELS(MXFP4_SPLIT)
}  // namespace lowbit::cuda_detail
