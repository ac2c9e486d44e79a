// MMQ's bf16 decode of the grid formats that hand out their groups by reference (grid_codes):
// each block keeps a bf16 copy of the format's grid, so one shared-memory read gives a group's
// values ready for the A fragment, where the int8 grid needs each magnitude byte placed under a
// bf16 exponent and rescaled (render_bf16). Plain constexpr C++ for the tiling (mmq_tiling.h).
#pragma once

#include "cuda/common/codebook_sizes.h"
#include "lowbit/formats/all.h"

namespace lowbit::cuda_detail {

template <class Traits>
inline constexpr bool kMmqGridTables = HasGridCodes<Traits>::value;

// The bf16 copy: every value of the grid as bf16, entries one after another (16 bytes for a grid
// of eight values per entry, 8 for four).
template <class Traits>
inline constexpr int kGridBf16Bytes = 2 * codebook_bytes(Traits::kCodebook);

}  // namespace lowbit::cuda_detail
