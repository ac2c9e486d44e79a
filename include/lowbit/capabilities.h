// What this build of lowbit and the machine it runs on can do, so a server enables a fast path
// only where the installed build has it.
#pragma once

#include <string>
#include <vector>

#include "lowbit/quant_type.h"

namespace lowbit {

// Kernels compiled into this build for one type.
struct KernelSet {
  bool cpu_reference = false;  // dequantize / linear / fused_moe on the CPU
  bool cpu_quantize = false;   // quantize from float on the CPU
  bool cuda_dequant = false;
  bool cuda_mmvq = false;
  bool cuda_mmq = false;
  bool cuda_moe_vec = false;
  bool cuda_moe_batched = false;
};

struct TypeCapability {
  const TypeInfo* info;
  KernelSet kernels;  // compiled into this build
  KernelSet usable;   // compiled in and runnable here: CUDA kernels only with a device they were built for
};

struct CudaDevice {
  int index;
  std::string name;
  int compute_major, compute_minor;
  int multiprocessors;
  bool runs_kernels;  // this build holds code for its architecture
};

struct Capabilities {
  std::string version;
  bool cuda_compiled = false;
  std::string cuda_archs;        // as compiled, e.g. "80,89,90a"
  int cuda_runtime_version = 0;  // e.g. 13000; 0 without CUDA
  std::vector<CudaDevice> cuda_devices;
  bool cuda_usable = false;  // CUDA compiled in and at least one device runs its kernels
  std::vector<TypeCapability> types;
};

Capabilities capabilities();

}  // namespace lowbit
