#include "lowbit/capabilities.h"

#include "lowbit/detail/cuda_support.h"

namespace lowbit {

Capabilities capabilities() {
  Capabilities caps;
  caps.version = LOWBIT_VERSION;
  detail::fill_cuda_capabilities(caps);
  bool hopper = false;  // a compute capability 9.0 device, where the sm_90a MMQ kernels run
  for (const CudaDevice& d : caps.cuda_devices) {
    caps.cuda_usable = caps.cuda_usable || (caps.cuda_compiled && d.runs_kernels);
    hopper = hopper || (caps.cuda_compiled && d.compute_major == 9 && d.compute_minor == 0);
  }
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
    t.usable.cuda_mmq = t.usable.cuda_mmq && hopper;
    caps.types.push_back(t);
  }
  return caps;
}

}  // namespace lowbit
