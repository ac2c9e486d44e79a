// The ggml weight types the GGUF-compatible ops (compat_ops.cpp, compat_moe_ops.cpp) compute on.
#pragma once

#include <cstdint>

#include "lowbit/quant_type.h"

namespace lowbit::torch_ops {

// The type behind a raw ggml id where lowbit computes on it (a GGUF weight type: not Q8_1, an
// activation format, nor lowbit's split MX ids); else RuntimeError in sgl-kernel's wording
// ("type: Unsupported GGUF <what> type <id>"), so that a server's existing handling keeps working.
const TypeInfo& ggml_weight_type(int64_t type, const char* what);

}  // namespace lowbit::torch_ops
