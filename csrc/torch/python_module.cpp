// The pybind11 module lowbit._C. Loading it registers the torch ops (TORCH_LIBRARY in this
// shared object); the functions here expose the C++ core's facts to Python.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "lowbit/capabilities.h"
#include "lowbit/dispatch.h"
#include "lowbit/error.h"
#include "lowbit/mmq_policy.h"
#include "lowbit/plan.h"
#include "lowbit/quant_type.h"

#if defined(LOWBIT_TORCH_CUDA)
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

// The facts of CUDA device `device_index` (< 0: the CPU).
lowbit::DeviceFacts facts_of(int device_index) {
  if (device_index < 0) return {};
#if defined(LOWBIT_TORCH_CUDA)
  return lowbit::cuda::device_facts(device_index);
#else
  throw py::value_error("device: this build of lowbit has no CUDA; got CUDA device " + std::to_string(device_index));
#endif
}

py::dict mmvq_config_dict(const lowbit::MmvqConfig& c) {
  py::dict d;
  d["kernel"] = lowbit::mmvq_kernel_name(c.kernel);
  d["math"] = lowbit::mmvq_math_name(c.math);
  d["tokens"] = c.tokens;
  d["kernel_tokens"] = c.kernel_tokens;
  d["blocks"] = c.blocks;
  d["threads"] = c.threads;
  d["shared_bytes"] = c.shared_bytes;
  d["int8_prologue"] = c.int8_prologue;
  d["workspace_bytes"] = c.workspace_bytes;
  return d;
}

// The plan lowbit.linear runs for x [m, k] and a weight [n, k] on `device` (an index, < 0 the
// CPU; or a tuple (major, minor, SMs, shared bytes per block, per SM) of a device to plan for).
py::dict plan_linear(int64_t qtype, int64_t m, int64_t n, int64_t k, const py::object& device,
                     const std::string& kernel, const std::string& math) {
  try {
    lowbit::DeviceFacts facts;
    if (py::isinstance<py::tuple>(device)) {
      const auto t = device.cast<std::tuple<int, int, int, int, int>>();
      facts = {std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t), std::get<4>(t)};
    } else {
      facts = facts_of(device.cast<int>());
    }
    const auto& info = lowbit::weight_type_info(qtype, "qtype");
    lowbit::PlanOptions options;
    if (kernel != "auto") options.kernel = lowbit::parse_dense_kernel(kernel, "kernel");
    options.math = lowbit::parse_mmvq_math(math, "math");
    const lowbit::Plan p = lowbit::plan_linear(info.type, m, n, k, facts, options);
    py::dict d;
    d["kernel"] = lowbit::dense_kernel_name(p.kernel);
    d["reason"] = p.reason;
    d["workspace_bytes"] = p.workspace_bytes;
    d["describe"] = lowbit::describe_plan(p);
    if (p.kernel == lowbit::DenseKernel::kMmvq) {
      d["passes"] = p.passes;
      d["mmvq"] = mmvq_config_dict(p.mmvq);
      d["mmvq_last"] = mmvq_config_dict(p.mmvq_last);
    } else if (p.kernel == lowbit::DenseKernel::kMmq) {
      py::dict c;
      c["tokens_per_tile"] = p.mmq.tokens_per_tile;
      c["rows_per_tile"] = p.mmq.rows_per_tile;
      c["splits"] = p.mmq.splits;
      c["k_pad"] = p.mmq.k_pad;
      c["math"] = p.mmq.int8 ? "int8" : "bf16";
      d["mmq"] = c;
    }
    return d;
  } catch (const lowbit::Error& e) {
    throw py::value_error(e.what());
  }
}

PYBIND11_MODULE(_C, m) {
  m.doc() = "lowbit's compiled core: torch ops (torch.ops.lowbit.*) and build facts";
  m.def("capabilities", &capabilities_dict, "What this build and machine can run, per type and kernel");
  m.def("plan_linear", &plan_linear, "The plan of a dense layer: kernel, configuration, workspace and reason",
        py::arg("qtype"), py::arg("m"), py::arg("n"), py::arg("k"), py::arg("device"), py::arg("kernel") = "auto",
        py::arg("math") = "auto");
  m.def(
      "types",
      [] {
        py::list out;
        for (const auto& t : lowbit::all_types()) out.append(type_dict(t));
        return out;
      },
      "Every quant type the C++ core knows");
  m.def(
      "mmq_int8_supported",
      [](int64_t qtype) {
        try {
          return lowbit::mmq_int8_supported(lowbit::weight_type_info(qtype, "qtype").type);
        } catch (const lowbit::Error& e) {
          throw py::value_error(e.what());
        }
      },
      "Whether MMQ's int8 path (math=\"int8\" of mmq and moe_batched) serves this weight type", py::arg("qtype"));
}
