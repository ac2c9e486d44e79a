// Instantiates every kernel launcher of one weight type; each instances/kernels_<family>.cu
// holds one type family, so that the families compile in parallel.
#pragma once

#include "cuda/dequant/dequant_kernel.cuh"
#include "cuda/mmvq/mmvq_launch.cuh"

#define LOWBIT_INSTANTIATE_KERNELS(Name)                                                      \
  template void launch_dequant<QuantType::Name>(const DequantArgs&, FloatType, cudaStream_t); \
  template void launch_mmvq<QuantType::Name>(const MmvqArgs&, FloatType, const MmvqConfig&, cudaStream_t);
