// Kernel instantiations for the iq1 family (one translation unit per family keeps builds parallel).
#include "cuda/dequant_kernel.cuh"
#include "cuda/mmvq_int8_kernel.cuh"

namespace lowbit::cuda_detail {
template void launch_dequant<QuantType::IQ1_S>(const DequantArgs&, FloatType, cudaStream_t);
template void launch_mmvq<QuantType::IQ1_S>(const MmvqArgs&, FloatType, MmvqMath, cudaStream_t);
template void launch_dequant<QuantType::IQ1_M>(const DequantArgs&, FloatType, cudaStream_t);
template void launch_mmvq<QuantType::IQ1_M>(const MmvqArgs&, FloatType, MmvqMath, cudaStream_t);
}  // namespace lowbit::cuda_detail
