// Device-independent pieces of the ops, written with ATen ops around a backend's dequantizer:
// the MoE layer (decode each used expert, GEMMs, weighted combine) and the activation function.
#pragma once

#include <ATen/ATen.h>

#include <functional>

#include "op_plans.h"

namespace lowbit::torch_ops {

// Decodes expert e (0 for 2-D weights) of w to a float tensor [rows, K] on w's device.
using DequantizeExpert = std::function<at::Tensor(const WeightArg& w, int64_t e, at::ScalarType dtype)>;

at::Tensor apply_activation(const at::Tensor& v, Activation a);

at::Tensor fused_moe_composite(const FusedMoePlan& p, const at::Tensor& x, const at::Tensor& topk_weights,
                               const at::Tensor& topk_ids, const DequantizeExpert& dequantize_expert);

}  // namespace lowbit::torch_ops
