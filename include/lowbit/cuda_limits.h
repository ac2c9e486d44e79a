// Limits of the CUDA kernels that host code (dispatcher, argument checks) needs without CUDA.
#pragma once

namespace lowbit {

// Largest token count MMVQ takes in one pass over the weight.
inline constexpr int kMmvqMaxTokens = 16;
// Tokens one pass of the int8 MMVQ (MmvqMath::kInt8) takes.
inline constexpr int kMmvqInt8MaxTokens = 8;

}  // namespace lowbit
