// Capabilities of a CUDA build: the devices present and the kernels compiled for every type.
#include <cuda_runtime.h>

#include <sstream>
#include <string>

#include "lowbit/detail/cuda_support.h"

#ifndef LOWBIT_CUDA_ARCHS
#define LOWBIT_CUDA_ARCHS ""
#endif

namespace lowbit::detail {
namespace {

// Whether an architecture list like "80,89,90a" holds code a device of this capability runs:
// exact SASS for its major version at or below its minor, or 90a on a 9.0 device.
bool runs_on(const std::string& archs, int major, int minor) {
  std::stringstream list(archs);
  std::string arch;
  while (std::getline(list, arch, ',')) {
    const bool a_suffix = !arch.empty() && arch.back() == 'a';
    const int value = std::stoi(a_suffix ? arch.substr(0, arch.size() - 1) : arch);
    const int amaj = value / 10, amin = value % 10;
    if (a_suffix ? (amaj == major && amin == minor) : (amaj == major && amin <= minor)) return true;
  }
  return false;
}

}  // namespace

void fill_cuda_capabilities(Capabilities& caps) {
  caps.cuda_compiled = true;
  caps.cuda_archs = LOWBIT_CUDA_ARCHS;
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) caps.cuda_runtime_version = runtime;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: report none, leave no sticky error
    return;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    caps.cuda_devices.push_back(CudaDevice{i, prop.name, prop.major, prop.minor, prop.multiProcessorCount,
                                           runs_on(caps.cuda_archs, prop.major, prop.minor)});
  }
}

void fill_cuda_kernels(QuantType t, KernelSet& k) {
  const TypeInfo* info = find_type(static_cast<int64_t>(t));
  if (info == nullptr || !info->is_weight) return;
  k.cuda_dequant = true;
  k.cuda_mmvq = true;
  k.cuda_moe_vec = true;  // the MoE kernels are instantiated for every weight type
  k.cuda_moe_batched = true;
#if defined(LOWBIT_WITH_SM90A)
  k.cuda_mmq = true;  // compiled for sm_90a: runs on compute capability 9.0 devices
#endif
}

}  // namespace lowbit::detail
