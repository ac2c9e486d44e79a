// MMQ's tile and split-K choice (include/lowbit/mmq_policy.h).
#include "lowbit/mmq_policy.h"

#include <algorithm>

#include "cuda/mmq/mmq_tiling.h"
#include "cuda/tuning/tuning.h"
#include "lowbit/error.h"
#include "lowbit/weights.h"

namespace lowbit {

bool mmq_int8_supported(QuantType t) {
  weight_type_info(static_cast<int64_t>(t), "qtype");
  bool ok = false;
  visit_weight_type(t, [&](auto traits) { ok = cuda_detail::mmq_int8_form<decltype(traits)>(); });
  return ok;
}

void check_mmq_math(QuantType t, MmvqMath math, const char* op) {
  LOWBIT_CHECK(math == MmvqMath::kAuto || math == MmvqMath::kBf16 || math == MmvqMath::kInt8,
               "math: unknown arithmetic ", static_cast<int>(math), " (kAuto, kBf16, kInt8)");
  LOWBIT_CHECK(math != MmvqMath::kInt8 || mmq_int8_supported(t), "math: \"int8\" ", op,
               " needs a type whose int8 form scales 32 weights at a time (every I-quant but iq1_m, iq2_xs, iq2_s; ",
               "q5_0, q8_0, mxfp4, mxfp4_split); got ", type_name(t));
}

bool mmq_int8_by_default(QuantType t, int tokens_per_tile) {
  return mmq_int8_supported(t) && tuning::mmq_int8_by_default(t, tokens_per_tile);
}

MmqConfig select_mmq_config(QuantType t, int64_t m, int64_t n, int64_t k, const DeviceFacts& device, MmvqMath math) {
  weight_type_info(static_cast<int64_t>(t), "qtype");
  row_bytes(t, k, "k");
  LOWBIT_CHECK(m >= 1, "x: MMQ needs at least one token, got M = ", m);
  LOWBIT_CHECK(n >= 0, "w: rows/N must be >= 0, got ", n);
  MmqConfig c;
  c.rows_per_tile = 128;
  // The smallest wgmma N that holds the tokens: fewer padded tokens below 128, and past 128 the
  // 128-token tile (64 accumulators per thread) keeps registers for the decode.
  c.tokens_per_tile = m <= 16 ? 16 : m <= 32 ? 32 : m <= 64 ? 64 : 128;
  check_mmq_math(t, math, "MMQ");
  c.int8 = math == MmvqMath::kInt8 || (math == MmvqMath::kAuto && mmq_int8_by_default(t, c.tokens_per_tile));
  if (c.int8) c.tokens_per_tile = std::min(c.tokens_per_tile, cuda_detail::kMmqInt8MaxTile);
  c.k_pad = (k + 255) / 256 * 256;
  const int64_t units = c.k_pad / 256;
  const int64_t tiles =
      ((n + c.rows_per_tile - 1) / c.rows_per_tile) * ((m + c.tokens_per_tile - 1) / c.tokens_per_tile);
  // Split K while the tiles alone leave block slots idle (the blocks a multiprocessor holds follow
  // from the kernel's shared memory), into at least 4 units per split and within the partial buffer.
  int64_t splits = 1;
  const int64_t sms =
      std::max(device.multiprocessors, 1) * std::max(cuda_detail::mmq_blocks_per_sm(t, c.tokens_per_tile, c.int8), 1);
  if (tiles > 0 && tiles < sms) {
    splits = sms / tiles;
    splits = std::min<int64_t>(splits, std::max<int64_t>(units / 4, 1));
    const int64_t per_split = m * std::max<int64_t>(n, 1) * 4;
    splits = std::min<int64_t>(splits, std::max<int64_t>(static_cast<int64_t>(kMmqMaxPartialBytes) / per_split, 1));
    splits = std::max<int64_t>(splits, 1);
  }
  c.splits = static_cast<int>(splits);
  c.activation_bytes = static_cast<size_t>(cuda_detail::mmq_activation_bytes(m, c.k_pad, c.int8));
  c.partial_bytes = c.splits > 1 ? static_cast<size_t>(c.splits * m * n * 4) : 0;
  return c;
}

}  // namespace lowbit
