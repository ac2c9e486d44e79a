// The shared launch helpers of common/launch.h.
#include "cuda/common/launch.h"

#include <cuda_runtime.h>

#include <mutex>

#include "lowbit/error.h"

namespace lowbit::cuda_detail {

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
    cudaDeviceGetAttribute(&l.compute_major, cudaDevAttrComputeCapabilityMajor, device);
    limits[device] = l;
    known[device].store(true, std::memory_order_release);
  }
  return limits[device];
}

void configure_shared_memory(const void* kernel, int bytes, const char* op) {
  if (bytes <= 48 * 1024) return;
  const int device = current_device();
  // one bit per (kernel, device) is overkill; the attribute call is cheap and idempotent, so
  // remember only the last kernel configured on each device
  static std::atomic<const void*> last[64];
  if (device < 64 && last[device].load(std::memory_order_relaxed) == kernel) return;
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  LOWBIT_CHECK(err == cudaSuccess, op, ": cannot use ", bytes, " bytes of shared memory: ", cudaGetErrorString(err));
  if (device < 64) last[device].store(kernel, std::memory_order_relaxed);
}

}  // namespace lowbit::cuda_detail
