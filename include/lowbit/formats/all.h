// Every format definition lowbit has, and the run-time dispatch onto their traits.
#pragma once

#include "lowbit/error.h"
#include "lowbit/formats/iq1.h"
#include "lowbit/formats/iq2.h"
#include "lowbit/formats/iq3.h"
#include "lowbit/formats/iq4.h"
#include "lowbit/formats/legacy.h"
#include "lowbit/formats/mx.h"
#include "lowbit/formats/traits.h"

namespace lowbit {

// Calls f(FormatTraits<T>{}) for the run-time weight type t; throws for non-weight types.
template <class F>
decltype(auto) visit_weight_type(QuantType t, F&& f) {
  switch (t) {
#define LOWBIT_VISIT_CASE(Name) \
  case QuantType::Name:         \
    return f(FormatTraits<QuantType::Name>{});
    LOWBIT_FOR_EACH_WEIGHT_TYPE(LOWBIT_VISIT_CASE)
#undef LOWBIT_VISIT_CASE
    default:
      break;
  }
  detail::fail("qtype: ", static_cast<int>(t), " is not a weight type lowbit can decode");
}

// Decodes weights [8g, 8g + 8) of a block to float exactly as ggml's reference does.
template <class Traits>
LOWBIT_HD void decode_group_f32(BlockRef b, int g, const Codebooks& cb, float* out) {
  render_f32(Traits::decode_group(b, g, cb), out);
}

}  // namespace lowbit
