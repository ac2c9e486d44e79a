// Kernel instantiations for the iq4 family (one translation unit per family keeps builds parallel).
#include "cuda/dequant_kernel.cuh"
#include "cuda/mmvq_int8_kernel.cuh"

namespace lowbit::cuda_detail {
template void launch_dequant<QuantType::IQ4_NL>(const DequantArgs&, FloatType, cudaStream_t);
template void launch_mmvq<QuantType::IQ4_NL>(const MmvqArgs&, FloatType, MmvqMath, cudaStream_t);
template void launch_dequant<QuantType::IQ4_XS>(const DequantArgs&, FloatType, cudaStream_t);
template void launch_mmvq<QuantType::IQ4_XS>(const MmvqArgs&, FloatType, MmvqMath, cudaStream_t);
}  // namespace lowbit::cuda_detail
