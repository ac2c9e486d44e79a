// Seam between the host-only core and the CUDA part: implemented in csrc/cuda when the build
// has CUDA, and by src/cuda_support_none.cpp otherwise.
#pragma once

#include "lowbit/capabilities.h"

namespace lowbit::detail {

void fill_cuda_capabilities(Capabilities& caps);
void fill_cuda_kernels(QuantType t, KernelSet& kernels);

}  // namespace lowbit::detail
