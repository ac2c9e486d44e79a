// Launch helpers every kernel family shares: launch error checks, the device's shared-memory
// limits, the shared-memory opt-in above 48 KB and the programmatic dependent launch (sm_90).
// Host code only; included by the kernels' launchers (*.cuh) and defined in common/launch.cu.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>

namespace lowbit::cuda_detail {

// Throws lowbit::Error with the CUDA error string when a launch failed.
void check_launch(const char* kernel);

// Throws like check_launch for the result of a cudaLaunchKernelEx (and clears the error state).
void launch_checked(const char* kernel, cudaError_t err);

// Whether `kernel`, as loaded on the current device, takes programmatic dependent launches: the
// device is sm_90+ and the kernel's code was compiled for PTX 9.0+ (where griddepcontrol exists).
bool kernel_has_programmatic_launch(const void* kernel);

// Shared memory and SMs of the current device (cached per device).
struct DeviceLimits {
  int shared_per_block_optin;  // bytes one block may take
  int shared_per_sm;
  int sms;  // streaming multiprocessors
  int compute_major = 0;
};
const DeviceLimits& current_device_limits();

// Raises a kernel's dynamic shared memory limit (needed above 48 KB); `op` names the caller in
// the error when the device refuses.
void configure_shared_memory(const void* kernel, int bytes, const char* op);

// Launches kKernel(args...) as a programmatic dependent of the work before it in the stream
// where the code that runs was compiled with griddepcontrol (PTX 9.0+, not e.g. a compute_89 PTX
// JIT-compiled for a newer GPU): its blocks may then start while the kernel before finishes, else
// a plain stream-ordered launch.
// The rules every programmatic kernel keeps:
// - Before pdl_wait_for_primary it reads nothing that any unfinished earlier kernel of the stream
//   writes and writes nothing that one reads or writes: not only the kernel just before it, since
//   a kernel that triggers its dependents before its own wait (the lane MMVQ) lets the chain run
//   ahead of kernels it has not waited for. Weights and codebooks are safe; activations,
//   routings, workspaces and outputs are not.
// - Every block reaches pdl_wait_for_primary before it exits, also a block with no work: a grid
//   that ends without waiting can end before its primary, and then the next kernel's wait no
//   longer covers the primary's writes.
template <auto kKernel, class... Args>
void launch_programmatic(dim3 grid, int threads, int smem, cudaStream_t stream, const char* name, const Args&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = static_cast<size_t>(smem);
  config.stream = stream;
  cudaLaunchAttribute overlap[1];
  overlap[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap[0].val.programmaticStreamSerializationAllowed = 1;
  static std::atomic<int> programmatic[64];  // per device: 0 not asked, 1 no, 2 yes
  int device = 0;
  cudaGetDevice(&device);
  int pdl = device < 64 ? programmatic[device].load(std::memory_order_relaxed) : 1;
  if (pdl == 0) {
    pdl = kernel_has_programmatic_launch(reinterpret_cast<const void*>(kKernel)) ? 2 : 1;
    if (device < 64) programmatic[device].store(pdl, std::memory_order_relaxed);
  }
  if (pdl == 2) {
    config.attrs = overlap;
    config.numAttrs = 1;
  }
  launch_checked(name, cudaLaunchKernelEx(&config, kKernel, args...));
}

}  // namespace lowbit::cuda_detail
