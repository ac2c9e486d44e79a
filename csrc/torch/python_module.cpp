// The pybind11 module lowbit._C. Loading it registers the torch ops (TORCH_LIBRARY in this
// shared object); the functions here expose the C++ core's facts to Python.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "lowbit/capabilities.h"
#include "lowbit/dispatch.h"
#include "lowbit/error.h"
#include "lowbit/quant_type.h"

#if defined(LOWBIT_TORCH_CUDA)
#include <cuda_runtime_api.h>

#include "lowbit/cuda.h"
#endif

namespace py = pybind11;

namespace {

py::dict type_dict(const lowbit::TypeInfo& t) {
  py::dict d;
  d["id"] = static_cast<int>(t.type);
  d["name"] = t.name;
  d["block_elems"] = t.block_elems;
  d["block_bytes"] = t.block_bytes;
  d["split_scales"] = t.split_scales;
  d["is_weight"] = t.is_weight;
  d["has_quantizer"] = t.has_quantizer;
  d["bits_per_weight"] = t.bits_per_weight;
  return d;
}

py::dict kernel_dict(const lowbit::KernelSet& ks) {
  py::dict k;
  k["cpu_reference"] = ks.cpu_reference;
  k["cpu_quantize"] = ks.cpu_quantize;
  k["cuda_dequant"] = ks.cuda_dequant;
  k["cuda_mmvq"] = ks.cuda_mmvq;
  k["cuda_mmq"] = ks.cuda_mmq;
  k["cuda_moe_vec"] = ks.cuda_moe_vec;
  k["cuda_moe_batched"] = ks.cuda_moe_batched;
  return k;
}

py::dict capabilities_dict() {
  const lowbit::Capabilities caps = lowbit::capabilities();
  py::dict build;
  build["version"] = caps.version;
  build["cuda_compiled"] = caps.cuda_compiled;
  build["cuda_archs"] = caps.cuda_archs;
  build["cuda_runtime_version"] = caps.cuda_runtime_version;
  build["cuda_usable"] = caps.cuda_usable;
  py::list devices;
  for (const auto& d : caps.cuda_devices) {
    py::dict dev;
    dev["index"] = d.index;
    dev["name"] = d.name;
    dev["compute_capability"] = py::make_tuple(d.compute_major, d.compute_minor);
    dev["multiprocessors"] = d.multiprocessors;
    dev["runs_kernels"] = d.runs_kernels;
    devices.append(dev);
  }
  py::dict types;
  for (const auto& t : caps.types) {
    py::dict entry = type_dict(*t.info);
    entry["kernels"] = kernel_dict(t.kernels);
    entry["usable"] = kernel_dict(t.usable);
    types[t.info->name] = entry;
  }
  py::dict out;
  out["build"] = build;
  out["cuda_devices"] = devices;
  out["types"] = types;
  return out;
}

}  // namespace

// The dispatcher's dense choice; device_index < 0 means the CPU.
py::tuple select_dense(int64_t qtype, int64_t m, int64_t n, int64_t k, int device_index) {
  lowbit::DeviceFacts facts;
  if (device_index >= 0) {
    const lowbit::Capabilities caps = lowbit::capabilities();
    for (const auto& d : caps.cuda_devices)
      if (d.index == device_index) {
        facts = {d.compute_major, d.compute_minor, d.multiprocessors};
        // the sm_90a MMQ kernels are compiled in and this is a 9.0 device
        bool compiled = false;
        for (const auto& t : caps.types) compiled = compiled || t.kernels.cuda_mmq;
        facts.mmq = compiled && d.compute_major == 9 && d.compute_minor == 0;
      }
  }
  try {
    const auto& info = lowbit::weight_type_info(qtype, "qtype");
    const lowbit::DenseChoice c = lowbit::select_dense(info.type, m, n, k, facts);
    return py::make_tuple(lowbit::dense_kernel_name(c.kernel), c.reason);
  } catch (const lowbit::Error& e) {
    throw py::value_error(e.what());
  }
}

#if defined(LOWBIT_TORCH_CUDA)
// The MMVQ kernel an M-token call on CUDA device `device_index` runs (lowbit::cuda::mmvq_kernel).
std::string mmvq_kernel(int64_t qtype, int64_t m, int64_t n, int64_t k, int device_index) {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess || cudaSetDevice(device_index) != cudaSuccess) {
    cudaGetLastError();
    throw py::value_error("device: no CUDA device " + std::to_string(device_index));
  }
  struct Restore {
    int device;
    ~Restore() { cudaSetDevice(device); }
  } restore{previous};
  try {
    const auto& info = lowbit::weight_type_info(qtype, "qtype");
    return lowbit::cuda::mmvq_kernel_name(lowbit::cuda::mmvq_kernel(info.type, n, k, m));
  } catch (const lowbit::Error& e) {
    throw py::value_error(e.what());
  }
}
#endif

PYBIND11_MODULE(_C, m) {
  m.doc() = "lowbit's compiled core: torch ops (torch.ops.lowbit.*) and build facts";
  m.def("capabilities", &capabilities_dict, "What this build and machine can run, per type and kernel");
  m.def("select_dense", &select_dense, "The dense kernel the dispatcher picks, and why");
#if defined(LOWBIT_TORCH_CUDA)
  m.def("mmvq_kernel", &mmvq_kernel, "The MMVQ kernel a call of M tokens runs on a CUDA device");
#endif
  m.def(
      "types",
      [] {
        py::list out;
        for (const auto& t : lowbit::all_types()) out.append(type_dict(t));
        return out;
      },
      "Every quant type the C++ core knows");
}
