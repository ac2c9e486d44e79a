// lowbit's CUDA API (include/lowbit/cuda.h): argument checks, then the per-type launchers.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "cuda/launch.h"
#include "lowbit/cuda.h"
#include "lowbit/error.h"
#include "lowbit/formats/all.h"

namespace lowbit {
namespace cuda_detail {

void check_launch(const char* kernel) {
  const cudaError_t err = cudaGetLastError();
  LOWBIT_CHECK(err == cudaSuccess, kernel, ": kernel launch failed: ", cudaGetErrorString(err));
}

void launch_checked(const char* kernel, cudaError_t err) {
  if (err != cudaSuccess) cudaGetLastError();  // the error is reported here, not by a later check
  LOWBIT_CHECK(err == cudaSuccess, kernel, ": kernel launch failed: ", cudaGetErrorString(err));
}

namespace {
int current_device() {
  int device = 0;
  cudaGetDevice(&device);
  return device;
}
}  // namespace

bool kernel_has_programmatic_launch(const void* kernel) {
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, current_device()) != cudaSuccess || major < 9)
    return false;
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, kernel) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attr.ptxVersion >= 90;
}

const DeviceLimits& current_device_limits() {
  constexpr int kDevices = 64;
  static DeviceLimits limits[kDevices];
  static std::atomic<bool> known[kDevices];
  static DeviceLimits fallback{48 * 1024, 96 * 1024, 1};  // devices past kDevices: conservative
  const int device = current_device();
  if (device >= kDevices) return fallback;
  if (!known[device].load(std::memory_order_acquire)) {
    static std::mutex mutex;
    const std::lock_guard<std::mutex> lock(mutex);
    DeviceLimits l{48 * 1024, 96 * 1024, 1};
    cudaDeviceGetAttribute(&l.shared_per_block_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    cudaDeviceGetAttribute(&l.shared_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device);
    cudaDeviceGetAttribute(&l.sms, cudaDevAttrMultiProcessorCount, device);
    limits[device] = l;
    known[device].store(true, std::memory_order_release);
  }
  return limits[device];
}

// Raises a kernel's dynamic shared memory limit once per device (needed above 48 KB).
void configure_shared_memory(const void* kernel, int bytes) {
  if (bytes <= 48 * 1024) return;
  int device = 0;
  cudaGetDevice(&device);
  // one bit per (kernel, device) is overkill; the attribute call is cheap and idempotent, so
  // remember only the last kernel configured on each device
  static std::atomic<const void*> last[64];
  if (device < 64 && last[device].load(std::memory_order_relaxed) == kernel) return;
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  LOWBIT_CHECK(err == cudaSuccess, "mmvq: cannot use ", bytes, " bytes of shared memory: ", cudaGetErrorString(err));
  if (device < 64) last[device].store(kernel, std::memory_order_relaxed);
}

}  // namespace cuda_detail

namespace cuda {
namespace {

bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

void check_weight(QuantType t, const WeightView& w, int64_t rows, int64_t k, const char* op) {
  const TypeInfo& info = weight_type_info(static_cast<int64_t>(t), "qtype");
  row_bytes(t, k, "k");
  LOWBIT_CHECK(rows >= 0, op, ": rows/N must be >= 0, got ", rows);
  LOWBIT_CHECK(rows == 0 || w.data != nullptr, "w: data pointer is null");
  LOWBIT_CHECK(aligned16(w.data), "w: data must be 16-byte aligned (kernels copy it in aligned 16-byte pieces)");
  LOWBIT_CHECK(w.row_stride >= row_bytes(t, k) || rows <= 1, "w: row stride ", w.row_stride,
               " is shorter than a row of ", row_bytes(t, k), " bytes");
  if (info.split_scales) {
    LOWBIT_CHECK(rows == 0 || w.scales != nullptr, "scales: ", info.name,
                 " keeps its E8M0 scales in a separate tensor, which is missing");
    LOWBIT_CHECK(w.scale_row_stride >= k / 32 || rows <= 1, "scales: row stride ", w.scale_row_stride,
                 " is shorter than K/32 = ", k / 32);
  }
  int block_align = 1;  // what the decode primitives assume of a block's start
  visit_weight_type(t, [&](auto traits) { block_align = decltype(traits)::kAlign; });
  LOWBIT_CHECK(w.row_stride % block_align == 0 || rows <= 1, "w: row stride ", w.row_stride, " must be a multiple of ",
               block_align, " bytes (", info.name, " blocks are read ", block_align, "-byte aligned)");
}

}  // namespace

void dequantize(QuantType t, const WeightView& w, int64_t rows, int64_t k, void* out, FloatType out_type,
                int64_t out_row_stride, cudaStream_t stream) {
  check_weight(t, w, rows, k, "dequantize");
  LOWBIT_CHECK(rows == 0 || out != nullptr, "out: pointer is null");
  LOWBIT_CHECK(aligned16(out), "out: must be 16-byte aligned");
  const int64_t elem = out_type == FloatType::F32 ? 4 : 2;
  LOWBIT_CHECK(out_row_stride >= k && (out_row_stride * elem) % 16 == 0, "out: row stride ", out_row_stride,
               " must be >= K = ", k, " and a multiple of 16 bytes");
  LOWBIT_CHECK(k / 8 < (int64_t{1} << 31) / 2, "k: K = ", k, " is too large");
  if (rows == 0) return;
  const cuda_detail::DequantArgs args{
      static_cast<const uint8_t*>(w.data), w.row_stride, w.scales, w.scale_row_stride, rows, k, out, out_row_stride};
  visit_weight_type(t,
                    [&](auto traits) { cuda_detail::launch_dequant<decltype(traits)::kType>(args, out_type, stream); });
}

size_t mmvq_workspace_bytes(QuantType t, int64_t m, int64_t k, MmvqMath math) {
  if (resolve_mmvq_math(t, m, math) != MmvqMath::kInt8) return 0;
  return static_cast<size_t>(cuda_detail::int8_activation_bytes(m, k));
}

namespace {

// The token count and arithmetic of an MMVQ call.
void check_mmvq_math(QuantType t, int64_t m, MmvqMath math) {
  LOWBIT_CHECK(m >= 1 && m <= kMmvqMaxTokens, "x: MMVQ takes 1 to ", kMmvqMaxTokens, " tokens, got M = ", m);
  LOWBIT_CHECK(math == MmvqMath::kAuto || math == MmvqMath::kBf16 || math == MmvqMath::kInt8,
               "math: unknown MmvqMath value ", static_cast<int>(math));
  LOWBIT_CHECK(math != MmvqMath::kInt8 || mmvq_int8_supported(t, m), "math: int8 MMVQ serves M <= ", kMmvqInt8MaxTokens,
               " tokens of every type but mxfp8_e4m3; got ", type_name(t), " with M = ", m);
}

// The one routing decision of an MMVQ call (`math` resolved).
cuda_detail::MmvqPlan plan_for(QuantType t, int64_t n, int64_t k, int64_t m, MmvqMath math) {
  cuda_detail::MmvqPlan plan;
  visit_weight_type(t, [&](auto traits) { plan = cuda_detail::plan_mmvq<decltype(traits)::kType>(n, k, m, math); });
  return plan;
}

// The plan of a call with these sizes, its arguments checked as mmvq checks them (the route queries).
cuda_detail::MmvqPlan checked_plan(QuantType t, int64_t n, int64_t k, int64_t m, MmvqMath math) {
  weight_type_info(static_cast<int64_t>(t), "qtype");
  row_bytes(t, k, "k");
  LOWBIT_CHECK(n >= 0, "w: rows/N must be >= 0, got ", n);
  check_mmvq_math(t, m, math);
  return plan_for(t, n, k, m, resolve_mmvq_math(t, m, math));
}

// Whether a call reads the int8 workspace: where the prologue kernel fills it (tensor cores; dp4a
// at three or four tokens).
bool reads_workspace(QuantType t, int64_t m, int64_t k, MmvqMath run, const cuda_detail::MmvqPlan& plan) {
  return mmvq_workspace_bytes(t, m, k, run) > 0 && plan.int8_prologue;
}

}  // namespace

const char* mmvq_kernel_name(MmvqKernel kernel) {
  switch (kernel) {
    case MmvqKernel::kDp4a:
      return "dp4a";
    case MmvqKernel::kInt8TensorCores:
      return "int8_tensor_cores";
    case MmvqKernel::kBf16TensorCores:
      return "bf16_tensor_cores";
  }
  return "unknown";
}

MmvqKernel mmvq_kernel(QuantType t, int64_t n, int64_t k, int64_t m, MmvqMath math) {
  return checked_plan(t, n, k, m, math).kernel;
}

bool mmvq_reads_workspace(QuantType t, int64_t n, int64_t k, int64_t m, MmvqMath math) {
  const cuda_detail::MmvqPlan plan = checked_plan(t, n, k, m, math);
  return reads_workspace(t, m, k, resolve_mmvq_math(t, m, math), plan);
}

void mmvq(QuantType t, const WeightView& w, int64_t n, int64_t k, const void* x, FloatType x_type, int64_t m,
          int64_t x_row_stride, void* y, int64_t y_row_stride, cudaStream_t stream, MmvqMath math, void* workspace,
          size_t workspace_bytes) {
  check_weight(t, w, n, k, "mmvq");
  check_mmvq_math(t, m, math);
  LOWBIT_CHECK(x != nullptr && y != nullptr, "x/y: null pointer");
  LOWBIT_CHECK(aligned16(x), "x: must be 16-byte aligned");
  LOWBIT_CHECK(x_row_stride >= k && x_row_stride % 8 == 0, "x: row stride ", x_row_stride, " must be >= K = ", k,
               " and a multiple of 8 elements");
  LOWBIT_CHECK(y_row_stride >= n, "y: row stride ", y_row_stride, " must be >= N = ", n);
  LOWBIT_CHECK(n < (int64_t{1} << 31) * 16, "w: N = ", n, " is too large");
  {
    // blocks of one kernel read x while others write y
    const int64_t elem = x_type == FloatType::F32 ? 4 : 2;
    const auto x_begin = reinterpret_cast<uintptr_t>(x), y_begin = reinterpret_cast<uintptr_t>(y);
    const auto x_end = x_begin + static_cast<uintptr_t>(((m - 1) * x_row_stride + k) * elem);
    const auto y_end = y_begin + static_cast<uintptr_t>(((m - 1) * y_row_stride + n) * elem);
    LOWBIT_CHECK(n == 0 || y_end <= x_begin || x_end <= y_begin, "y: must not overlap x");
  }
  const MmvqMath run = resolve_mmvq_math(t, m, math);
  const size_t need = mmvq_workspace_bytes(t, m, k, run);
  LOWBIT_CHECK(workspace == nullptr || workspace_bytes >= need, "workspace: ", workspace_bytes,
               " bytes is less than the ", need, " bytes mmvq_workspace_bytes asks for");
  LOWBIT_CHECK(aligned16(workspace), "workspace: must be 16-byte aligned");
  if (n == 0) return;
  cuda_detail::MmvqArgs args{static_cast<const uint8_t*>(w.data),
                             w.row_stride,
                             w.scales,
                             w.scale_row_stride,
                             n,
                             k,
                             x,
                             x_row_stride,
                             static_cast<int>(m),
                             y,
                             y_row_stride};
  struct StreamOrderedBuffer {  // freed on the stream after the kernels, also when a launch throws
    void* ptr = nullptr;
    cudaStream_t stream;
    ~StreamOrderedBuffer() {
      if (ptr != nullptr) cudaFreeAsync(ptr, stream);
    }
  } owned{nullptr, stream};
  // mmvq_workspace_bytes sizes the workspace for callers that do not know the route; the plan
  // decides whether it is read here and is the one launch_mmvq runs.
  const cuda_detail::MmvqPlan plan = plan_for(t, n, k, m, run);
  const bool uses_workspace = reads_workspace(t, m, k, run, plan);
  if (uses_workspace && workspace == nullptr) {
    const cudaError_t err = cudaMallocAsync(&owned.ptr, need, stream);
    LOWBIT_CHECK(err == cudaSuccess, "mmvq: cannot allocate its ", need, " byte workspace: ", cudaGetErrorString(err));
    workspace = owned.ptr;
  }
  if (uses_workspace) {
    args.xs = static_cast<const float*>(workspace);
    args.xq = static_cast<const uint8_t*>(workspace) + k;
  }
  visit_weight_type(
      t, [&](auto traits) { cuda_detail::launch_mmvq<decltype(traits)::kType>(args, x_type, plan, stream); });
}

}  // namespace cuda
}  // namespace lowbit
