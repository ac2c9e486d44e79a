// Kernel instantiations for the iq2 family (one translation unit per family keeps builds parallel).
#include "cuda/dequant_kernel.cuh"
#include "cuda/mmvq_int8_kernel.cuh"

namespace lowbit::cuda_detail {
template void launch_dequant<QuantType::IQ2_XXS>(const DequantArgs&, FloatType, cudaStream_t);
template void launch_mmvq<QuantType::IQ2_XXS>(const MmvqArgs&, FloatType, MmvqMath, cudaStream_t);
template void launch_dequant<QuantType::IQ2_XS>(const DequantArgs&, FloatType, cudaStream_t);
template void launch_mmvq<QuantType::IQ2_XS>(const MmvqArgs&, FloatType, MmvqMath, cudaStream_t);
template void launch_dequant<QuantType::IQ2_S>(const DequantArgs&, FloatType, cudaStream_t);
template void launch_mmvq<QuantType::IQ2_S>(const MmvqArgs&, FloatType, MmvqMath, cudaStream_t);
}  // namespace lowbit::cuda_detail
