// Turning torch tensors into lowbit's raw views, with the argument checks every op shares.
// Errors name the argument and the rule (TORCH_CHECK -> RuntimeError / ValueError in Python).
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <optional>
#include <string>

#include "lowbit/cpu.h"
#include "lowbit/dispatch.h"
#include "lowbit/error.h"
#include "lowbit/quant_type.h"
#include "lowbit/weights.h"

namespace lowbit::torch_ops {

// A quantized weight tensor (and its split scales) checked against its type.
struct WeightArg {
  QuantType type;
  const TypeInfo* info;
  int64_t experts;     // 0 for a 2-D weight
  int64_t rows;        // N
  int64_t k;           // K
  WeightView view;     // data pointers are null for Meta tensors
  int64_t total_rows;  // rows of every expert (E * N; N for a 2-D weight; 0 for E = 0)
};

// Validates w (uint8 [N, row_bytes] or [E, N, row_bytes]; split MX: elements + scales) for qtype.
// `k` (-1: derive; otherwise > 0) is checked against row_bytes. Errors name `w_name`, `scales_name`, `type_name`.
WeightArg weight_arg(const at::Tensor& w, int64_t qtype, int64_t k, const std::optional<at::Tensor>& scales,
                     const char* w_name, const char* scales_name, bool allow_3d, const char* type_name = "qtype");

// x must be float32/bfloat16/float16, on w's device.
void check_activation(const at::Tensor& x, const char* name, const at::Tensor& w, const char* w_name);

// lowbit's FloatType for a torch dtype (float32, bfloat16, float16); ValueError naming `dtype` otherwise.
FloatType float_type(at::ScalarType t);

// What the dispatcher needs to know about a device (compute capability 0.0 for the CPU).
DeviceFacts device_facts(const c10::Device& device);

void check_same_device(const at::Tensor& a, const char* a_name, const at::Tensor& b, const char* b_name);

// Runs f, rethrowing lowbit::Error as c10::ValueError (Python ValueError, same message).
template <class F>
decltype(auto) translate_errors(F&& f) {
  try {
    return f();
  } catch (const lowbit::Error& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
}

}  // namespace lowbit::torch_ops
