// Kernel instantiations for the legacy family (one translation unit per family keeps builds parallel).
#include "cuda/dequant_kernel.cuh"
#include "cuda/mmvq_int8_kernel.cuh"

namespace lowbit::cuda_detail {
template void launch_dequant<QuantType::Q8_0>(const DequantArgs&, FloatType, cudaStream_t);
template void launch_mmvq<QuantType::Q8_0>(const MmvqArgs&, FloatType, MmvqMath, cudaStream_t);
template void launch_dequant<QuantType::Q5_0>(const DequantArgs&, FloatType, cudaStream_t);
template void launch_mmvq<QuantType::Q5_0>(const MmvqArgs&, FloatType, MmvqMath, cudaStream_t);
}  // namespace lowbit::cuda_detail
