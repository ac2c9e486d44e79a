#include "lowbit/capabilities.h"

#include "lowbit/detail/cuda_support.h"

namespace lowbit {

Capabilities capabilities() {
  Capabilities caps;
  caps.version = LOWBIT_VERSION;
  detail::fill_cuda_capabilities(caps);
  for (const TypeInfo& info : all_types()) {
    TypeCapability t{&info, {}};
    t.kernels.cpu_reference = info.is_weight;
    t.kernels.cpu_quantize = info.has_quantizer;
    detail::fill_cuda_kernels(info.type, t.kernels);
    caps.types.push_back(t);
  }
  return caps;
}

}  // namespace lowbit
