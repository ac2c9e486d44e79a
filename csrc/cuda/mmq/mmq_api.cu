// lowbit::cuda::mmq (include/lowbit/cuda_mmq.h): argument checks, the configuration, the workspace,
// then the per-type launcher compiled for sm_90a (mmq_<family>.cu).
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/launch.h"
#include "cuda/mmq/mmq_launch.h"
#include "lowbit/cuda_mmq.h"
#include "lowbit/error.h"
#include "lowbit/formats/all.h"

namespace lowbit::cuda {
namespace {

DeviceFacts current_device_facts() {
  int device = 0;
  cudaGetDevice(&device);
  DeviceFacts f;
  cudaDeviceGetAttribute(&f.compute_major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&f.compute_minor, cudaDevAttrComputeCapabilityMinor, device);
  cudaDeviceGetAttribute(&f.multiprocessors, cudaDevAttrMultiProcessorCount, device);
  return f;
}

bool aligned(const void* p, uintptr_t bytes) {
  return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}

}  // namespace

bool mmq_available_on(int device) {
#if defined(LOWBIT_WITH_SM90A)
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return major == 9 && minor == 0;
#else
  (void)device;
  return false;
#endif
}

bool mmq_available() {
  int device = 0;
  cudaGetDevice(&device);
  return mmq_available_on(device);
}

MmqConfig mmq_config(QuantType t, int64_t m, int64_t n, int64_t k) {
  return select_mmq_config(t, m, n, k, current_device_facts());
}

void mmq(QuantType t, const WeightView& w, int64_t n, int64_t k, const void* x, FloatType x_type, int64_t m,
         int64_t x_row_stride, void* y, FloatType y_type, int64_t y_row_stride, cudaStream_t stream, void* workspace,
         size_t workspace_bytes) {
  const TypeInfo& info = weight_type_info(static_cast<int64_t>(t), "qtype");
  const int64_t rb = row_bytes(t, k, "k");
  LOWBIT_CHECK(m >= 1, "x: MMQ needs at least one token, got M = ", m);
  LOWBIT_CHECK(n >= 0, "w: rows/N must be >= 0, got ", n);
  LOWBIT_CHECK(mmq_available(),
               "mmq: needs a compute capability 9.0 GPU and a build for sm_90a (LOWBIT_CUDA_ARCHS "
               "holding 90a); use dequantize + a bf16 GEMM elsewhere");
  LOWBIT_CHECK(n == 0 || w.data != nullptr, "w: data pointer is null");
  LOWBIT_CHECK(aligned(w.data, 16), "w: data must be 16-byte aligned (the kernel copies it in aligned 16-byte pieces)");
  LOWBIT_CHECK(w.row_stride >= rb || n <= 1, "w: row stride ", w.row_stride, " is shorter than a row of ", rb,
               " bytes");
  int block_align = 1;
  visit_weight_type(t, [&](auto traits) { block_align = decltype(traits)::kAlign; });
  LOWBIT_CHECK(w.row_stride % block_align == 0 || n <= 1, "w: row stride ", w.row_stride, " must be a multiple of ",
               block_align, " bytes (", info.name, " blocks are read ", block_align, "-byte aligned)");
  if (info.split_scales) {
    LOWBIT_CHECK(n == 0 || w.scales != nullptr, "scales: ", info.name,
                 " keeps its E8M0 scales in a separate tensor, which is missing");
    LOWBIT_CHECK(w.scale_row_stride >= k / 32 || n <= 1, "scales: row stride ", w.scale_row_stride,
                 " is shorter than K/32 = ", k / 32);
  }
  LOWBIT_CHECK(x != nullptr && y != nullptr, "x/y: null pointer");
  LOWBIT_CHECK(x_row_stride >= k, "x: row stride ", x_row_stride, " must be >= K = ", k);
  LOWBIT_CHECK(y_row_stride >= n, "y: row stride ", y_row_stride, " must be >= N = ", n);
  {
    const int64_t x_elem = x_type == FloatType::F32 ? 4 : 2, y_elem = y_type == FloatType::F32 ? 4 : 2;
    const auto x_begin = reinterpret_cast<uintptr_t>(x), y_begin = reinterpret_cast<uintptr_t>(y);
    const auto x_end = x_begin + static_cast<uintptr_t>(((m - 1) * x_row_stride + k) * x_elem);
    const auto y_end = y_begin + static_cast<uintptr_t>(((m - 1) * y_row_stride + n) * y_elem);
    LOWBIT_CHECK(n == 0 || y_end <= x_begin || x_end <= y_begin, "y: must not overlap x");
  }
  const MmqConfig config = mmq_config(t, m, n, k);
  LOWBIT_CHECK(workspace == nullptr || workspace_bytes >= config.workspace_bytes(), "workspace: ", workspace_bytes,
               " bytes is less than the ", config.workspace_bytes(), " bytes mmq_config asks for");
  LOWBIT_CHECK(aligned(workspace, 256), "workspace: must be 256-byte aligned");
  LOWBIT_CHECK(static_cast<uint64_t>((n + 127) / 128) < (uint64_t{1} << 31) && (m + 15) / 16 <= 65535 * 8,
               "x/w: M = ", m, ", N = ", n, " exceed the grid");
  if (n == 0) return;
  struct StreamOrderedBuffer {  // freed on the stream after the kernels, also when a launch throws
    void* ptr = nullptr;
    cudaStream_t stream;
    ~StreamOrderedBuffer() {
      if (ptr != nullptr) cudaFreeAsync(ptr, stream);
    }
  } owned{nullptr, stream};
  if (workspace == nullptr) {
    const cudaError_t err = cudaMallocAsync(&owned.ptr, config.workspace_bytes(), stream);
    LOWBIT_CHECK(err == cudaSuccess, "mmq: cannot allocate its ", config.workspace_bytes(),
                 " byte workspace: ", cudaGetErrorString(err));
    workspace = owned.ptr;
  }
  cuda_detail::MmqArgs args{static_cast<const uint8_t*>(w.data),
                            w.row_stride,
                            w.scales,
                            w.scale_row_stride,
                            n,
                            k,
                            x,
                            x_row_stride,
                            x_type,
                            m,
                            y,
                            y_row_stride,
                            y_type,
                            static_cast<uint8_t*>(workspace)};
#if defined(LOWBIT_WITH_SM90A)
  visit_weight_type(t, [&](auto traits) { cuda_detail::launch_mmq<decltype(traits)::kType>(args, config, stream); });
#endif
}

}  // namespace lowbit::cuda
