#include "lowbit/capabilities.h"

#include "lowbit/detail/cuda_support.h"

namespace lowbit {

Capabilities capabilities() {
  Capabilities caps;
  caps.version = LOWBIT_VERSION;
  detail::fill_cuda_capabilities(caps);
  for (const CudaDevice& d : caps.cuda_devices)
    caps.cuda_usable = caps.cuda_usable || (caps.cuda_compiled && d.runs_kernels);
  for (const TypeInfo& info : all_types()) {
    TypeCapability t{&info, {}, {}};
    t.kernels.cpu_reference = info.is_weight;
    t.kernels.cpu_quantize = info.has_quantizer;
    detail::fill_cuda_kernels(info.type, t.kernels);
    t.usable = t.kernels;
    if (!caps.cuda_usable) {
      t.usable.cuda_dequant = t.usable.cuda_mmvq = t.usable.cuda_mmq = false;
      t.usable.cuda_moe_vec = t.usable.cuda_moe_batched = false;
    }
    caps.types.push_back(t);
  }
  return caps;
}

}  // namespace lowbit
