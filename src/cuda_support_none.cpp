// A build without CUDA: no devices, no CUDA kernels.
#include "lowbit/detail/cuda_support.h"

#if !defined(LOWBIT_WITH_CUDA)  // with CUDA, csrc/cuda/cuda_support.cu defines these
namespace lowbit::detail {

void fill_cuda_capabilities(Capabilities&) {}
void fill_cuda_kernels(QuantType, KernelSet&) {}

}  // namespace lowbit::detail
#endif
