// Kernel instantiations for the mx family (one translation unit per family keeps builds parallel).
#include "cuda/dequant_kernel.cuh"
#include "cuda/mmvq_int8_kernel.cuh"

namespace lowbit::cuda_detail {
template void launch_dequant<QuantType::MXFP4>(const DequantArgs&, FloatType, cudaStream_t);
template void launch_mmvq<QuantType::MXFP4>(const MmvqArgs&, FloatType, MmvqMath, cudaStream_t);
template void launch_dequant<QuantType::MXFP8_E4M3>(const DequantArgs&, FloatType, cudaStream_t);
template void launch_mmvq<QuantType::MXFP8_E4M3>(const MmvqArgs&, FloatType, MmvqMath, cudaStream_t);
template void launch_dequant<QuantType::MXFP4_SPLIT>(const DequantArgs&, FloatType, cudaStream_t);
template void launch_mmvq<QuantType::MXFP4_SPLIT>(const MmvqArgs&, FloatType, MmvqMath, cudaStream_t);
}  // namespace lowbit::cuda_detail
