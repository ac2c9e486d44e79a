// lowbit::cuda::mmq (include/lowbit/cuda_mmq.h): argument checks, the configuration, the workspace,
// then the per-type launcher compiled for sm_90a (mmq_<family>.cu).
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/api/api_support.h"
#include "cuda/common/launch.h"
#include "cuda/mmq/mmq_launch.h"
#include "lowbit/cuda.h"
#include "lowbit/cuda_mmq.h"
#include "lowbit/error.h"
#include "lowbit/formats/all.h"

namespace lowbit::cuda {

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

MmqConfig mmq_config(QuantType t, int64_t m, int64_t n, int64_t k, MmvqMath math) {
  return select_mmq_config(t, m, n, k, device_facts(), math);
}

namespace {

// The checks of an MMQ call beyond the weight's (the caller ran check_weight).
void check_call(int64_t m, int64_t n, int64_t k, const void* x, FloatType x_type, int64_t x_row_stride, const void* y,
                FloatType y_type, int64_t y_row_stride, const MmqConfig& config, void* workspace,
                size_t workspace_bytes) {
  LOWBIT_CHECK(m >= 1, "x: MMQ needs at least one token, got M = ", m);
  LOWBIT_CHECK(mmq_available(),
               "mmq: needs a compute capability 9.0 GPU and a build for sm_90a (LOWBIT_CUDA_ARCHS "
               "holding 90a); use dequantize + a bf16 GEMM elsewhere");
  LOWBIT_CHECK(x != nullptr && y != nullptr, "x/y: null pointer");
  LOWBIT_CHECK(x_row_stride >= k, "x: row stride ", x_row_stride, " must be >= K = ", k);
  LOWBIT_CHECK(y_row_stride >= n, "y: row stride ", y_row_stride, " must be >= N = ", n);
  cuda_detail::check_no_overlap(x, x_type == FloatType::F32 ? 4 : 2, x_row_stride, k, y,
                                y_type == FloatType::F32 ? 4 : 2, y_row_stride, n, m);
  LOWBIT_CHECK(workspace == nullptr || workspace_bytes >= config.workspace_bytes(), "workspace: ", workspace_bytes,
               " bytes is less than the ", config.workspace_bytes(), " bytes mmq_config asks for");
  LOWBIT_CHECK((reinterpret_cast<uintptr_t>(workspace) & 255u) == 0, "workspace: must be 256-byte aligned");
  // the grid: row tiles on x, token tiles on y (at most 65535), splits on z
  LOWBIT_CHECK((m + config.tokens_per_tile - 1) / config.tokens_per_tile <= 65535 &&
                   (n + config.rows_per_tile - 1) / config.rows_per_tile < (int64_t{1} << 31),
               "x/w: M = ", m, ", N = ", n, " exceed the grid");
}

// Runs `config` (checked) on the stream.
void run(QuantType t, const WeightView& w, int64_t n, int64_t k, const void* x, FloatType x_type, int64_t m,
         int64_t x_row_stride, void* y, FloatType y_type, int64_t y_row_stride, const MmqConfig& config,
         void* workspace, cudaStream_t stream) {
  if (n == 0) return;
  cuda_detail::StreamOrderedBuffer owned{nullptr, stream};
  workspace = cuda_detail::workspace_or_allocate(workspace, config.workspace_bytes(), owned, stream, "mmq");
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
#else
  (void)t;
  (void)args;
#endif
}

}  // namespace

void mmq(QuantType t, const WeightView& w, int64_t n, int64_t k, const void* x, FloatType x_type, int64_t m,
         int64_t x_row_stride, void* y, FloatType y_type, int64_t y_row_stride, cudaStream_t stream, void* workspace,
         size_t workspace_bytes, MmvqMath math) {
  cuda_detail::check_weight(t, w, n, k, "mmq");
  LOWBIT_CHECK(m >= 1, "x: MMQ needs at least one token, got M = ", m);
  const MmqConfig config = mmq_config(t, m, n, k, math);
  check_call(m, n, k, x, x_type, x_row_stride, y, y_type, y_row_stride, config, workspace, workspace_bytes);
  run(t, w, n, k, x, x_type, m, x_row_stride, y, y_type, y_row_stride, config, workspace, stream);
}

}  // namespace lowbit::cuda

namespace lowbit::cuda_detail {

void run_mmq_plan(QuantType t, const WeightView& w, int64_t n, int64_t k, const void* x, FloatType x_type, int64_t m,
                  int64_t x_row_stride, void* y, int64_t y_row_stride, const MmqConfig& config, void* workspace,
                  size_t workspace_bytes, cudaStream_t stream) {
  cuda::check_call(m, n, k, x, x_type, x_row_stride, y, x_type, y_row_stride, config, workspace, workspace_bytes);
  cuda::run(t, w, n, k, x, x_type, m, x_row_stride, y, x_type, y_row_stride, config, workspace, stream);
}

}  // namespace lowbit::cuda_detail
