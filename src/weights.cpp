#include "lowbit/weights.h"

#include "lowbit/error.h"

namespace lowbit {

int64_t row_bytes(QuantType t, int64_t k, const char* arg) {
  const TypeInfo& info = weight_type_info(static_cast<int64_t>(t));
  LOWBIT_CHECK(k > 0 && k % info.block_elems == 0, arg, ": K = ", k, " must be a positive multiple of ",
               info.block_elems, " (one ", info.name, " block)");
  return k / info.block_elems * info.block_bytes;
}

int64_t k_from_row_bytes(QuantType t, int64_t bytes, const char* arg) {
  const TypeInfo& info = weight_type_info(static_cast<int64_t>(t));
  LOWBIT_CHECK(bytes > 0 && bytes % info.block_bytes == 0, arg, ": a row of ", bytes,
               " bytes is not a whole number of ", info.name, " blocks (", info.block_bytes, " bytes each)");
  return bytes / info.block_bytes * info.block_elems;
}

int64_t scales_per_row(QuantType t, int64_t k) {
  return weight_type_info(static_cast<int64_t>(t)).split_scales ? k / 32 : 0;
}

}  // namespace lowbit
