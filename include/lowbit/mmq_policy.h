// MMQ's configuration for a call: the token tile, the split of K and the workspace they need.
// Pure C++ (no CUDA): the CUDA API runs what select_mmq_config returns, and the tests check it
// on any machine.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lowbit/dispatch.h"
#include "lowbit/quant_type.h"

namespace lowbit {

struct MmqConfig {
  int tokens_per_tile = 0;      // 16, 32, 64 or 128 tokens per block (the wgmma N)
  int rows_per_tile = 0;        // weight rows per block (two warpgroups of 64)
  int splits = 1;               // K split into this many ranges, summed in a fixed order
  int64_t k_pad = 0;            // K rounded up to the 256-weight unit
  bool int8 = false;            // activations as int8 per 32 weights, int8 wgmma (else bf16)
  size_t activation_bytes = 0;  // the activations in the kernel's order and form
  size_t partial_bytes = 0;     // float32 partial sums [splits, M, N] (0 without a split)
  size_t workspace_bytes() const { return activation_bytes + partial_bytes; }
};

// Largest float32 partial-sum buffer a split of K may take.
inline constexpr size_t kMmqMaxPartialBytes = size_t{8} << 20;

// The configuration for y[M, N] = x[M, K] W^T of type t on `device` (multiprocessors fill the
// grid). math: kBf16 decodes the weights to bf16 and rounds the activations to bf16; kInt8
// multiplies the weights' int8 codes with activations quantized per token and 32 weights (the int8
// MMVQ's precision) on int8 tensor cores, for the types mmq_int8_supported names, in tiles of up to
// 64 tokens; kAuto takes int8 where mmq_int8_by_default says it was measured faster, else bf16. Throws lowbit::Error
// naming the argument for a type lowbit cannot decode, K not a whole number of blocks, M < 1, N < 0, or kInt8 for a
// type without a 32-weight int8 form.
MmqConfig select_mmq_config(QuantType t, int64_t m, int64_t n, int64_t k, const DeviceFacts& device,
                            MmvqMath math = MmvqMath::kAuto);

// Whether kInt8 serves type t: an int8 form with one scale per 32 weights (every I-quant but IQ1_M,
// IQ2_XS and IQ2_S; Q5_0, Q8_0, both MXFP4 forms).
bool mmq_int8_supported(QuantType t);

// Throws lowbit::Error naming `math` where it is no MmvqMath value, or kInt8 for a type
// mmq_int8_supported does not name (`op`: the operation, in the message). The MMQ and
// moe_batched entry points share it.
void check_mmq_math(QuantType t, MmvqMath math, const char* op);

// Whether math kAuto runs type t's `tokens_per_tile`-token tiles on the int8 path (the measured
// tuning rows of sm_90: the nibble formats IQ4_XS, IQ4_NL and IQ1_S up to 32-token tiles, the grid
// formats IQ2_XXS, IQ3_XXS and IQ3_S at 16-token tiles). The
// grouped MoE kernel (moe_batched, the fused layer's batched path) follows the same rule.
bool mmq_int8_by_default(QuantType t, int tokens_per_tile);

}  // namespace lowbit
