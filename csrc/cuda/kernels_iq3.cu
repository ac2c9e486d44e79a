// Kernel instantiations for the iq3 family (one translation unit per family keeps builds parallel).
#include "cuda/dequant_kernel.cuh"
#include "cuda/mmvq_int8_kernel.cuh"

namespace lowbit::cuda_detail {
template void launch_dequant<QuantType::IQ3_XXS>(const DequantArgs&, FloatType, cudaStream_t);
template void launch_mmvq<QuantType::IQ3_XXS>(const MmvqArgs&, FloatType, MmvqMath, cudaStream_t);
template void launch_dequant<QuantType::IQ3_S>(const DequantArgs&, FloatType, cudaStream_t);
template void launch_mmvq<QuantType::IQ3_S>(const MmvqArgs&, FloatType, MmvqMath, cudaStream_t);
}  // namespace lowbit::cuda_detail
