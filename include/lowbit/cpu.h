// lowbit's CPU reference: the oracle every other backend is tested against, and the path that
// runs where no GPU exists. Plain C++ over raw pointers; no torch.
#pragma once

#include <cstdint>

#include "lowbit/formats/mx_codec.h"
#include "lowbit/quant_type.h"
#include "lowbit/weights.h"

namespace lowbit {

enum class FloatType : int32_t { F32 = 0, BF16 = 1, F16 = 2 };

enum class Activation : int32_t { kSiLU = 0, kGELU = 1, kGELUTanh = 2 };

namespace cpu {

// Decodes rows [0, rows) of w (2-D view) to `out` (row r at out + r * out_row_stride elements).
// Bit-exact with ggml's reference dequantization for every GGUF type in float32; bf16 and fp16
// outputs are the float32 values rounded to nearest even.
void dequantize(QuantType t, const WeightView& w, int64_t rows, int64_t k, void* out, FloatType out_type,
                int64_t out_row_stride);

// Quantizes rows x [rows, k] (row-major floats):
//   MXFP8_E4M3, MXFP4_SPLIT: data = elements, scales = E8M0 [rows, k/32]; `rule` picks the scale.
//   MXFP4 (GGUF), Q8_0, Q8_1: data = blocks [rows, row_bytes]; scales unused (may be null).
// NaN policy: a split MX block holding NaN or +-Inf gets scale 0xFF (NaN) and zero elements, so
// it dequantizes to NaN; GGUF types cannot represent such a block and the call throws.
void quantize(QuantType t, const float* x, int64_t rows, int64_t k, ScaleRule rule, uint8_t* data, uint8_t* scales);

// y[m, n] = sum_k x[m, k] * W[n, k] (+ bias[n]), accumulated in double. x, y row-major.
void linear(const float* x, int64_t m, QuantType t, const WeightView& w, int64_t n, int64_t k, const float* bias,
            float* y);

// One MoE projection pair's weights: w13 [E, 2I, H] (gate rows first, then up) and w2 [E, H, I].
struct MoeLayer {
  QuantType w13_type;
  WeightView w13;
  QuantType w2_type;
  WeightView w2;
  int64_t local_experts;  // E: experts held in w13 / w2
  int64_t hidden;         // H
  int64_t intermediate;   // I
  Activation activation = Activation::kSiLU;
  int64_t expert_begin = 0;  // global id of local expert 0; ids outside [begin, begin + E) add zero
};

// out[t] = sum_j topk_weights[t, j] * W2[e] (act(W13[e] x_t)[:I] * (W13[e] x_t)[I:]), e = topk_ids[t, j]
// mapped to local expert e - expert_begin. Ids that are negative or not local contribute exactly 0.
void fused_moe(const float* x, int64_t tokens, const MoeLayer& layer, const float* topk_weights,
               const int64_t* topk_ids, int64_t top_k, float* out);

// One activation applied to a float (the definitions kernels are tested against).
double activate(Activation a, double v);

}  // namespace cpu
}  // namespace lowbit
